'use strict';
// A local S3-compatible server on 127.0.0.1 (scripts/start-s3.sh): s3rver
// (the @20minutes fork, which checks SigV4 signatures), one bucket, one key
// pair besides s3rver's own S3RVER/S3RVER. Prints "listening PORT" once up.
// Usage: node --openssl-legacy-provider server.js DIR PORT BUCKET KEY SECRET [LOG]
const S3rver = require('@20minutes/s3rver');
const { DUMMY_ACCOUNT } = require('@20minutes/s3rver/lib/models/account');

const fs = require('fs');

const [dir, port, bucket, key, secret, log] = process.argv.slice(2);
if (!secret) {
  console.error('usage: server.js DIR PORT BUCKET KEY SECRET');
  process.exit(2);
}
DUMMY_ACCOUNT.createKeyPair(key, secret);
const server = new S3rver({
  directory: dir,
  address: '127.0.0.1',
  port: Number(port),
  silent: true,
  vhostBuckets: false,
  configureBuckets: [{ name: bucket, configs: [] }],
});
// Every request is logged to LOG (one JSON object per line: method, url,
// range, status, bytes of the request and response bodies), so that the
// suite counts on the server side what a client transferred.
function logRequests(httpServer, log) {
  const out = fs.createWriteStream(log, { flags: 'a' });
  httpServer.prependListener('request', (req, res) => {
    let down = 0;
    // the request body as declared: reading it here would take it from s3rver
    const up = Number(req.headers['content-length'] || 0);
    const write = res.write.bind(res);
    const end = res.end.bind(res);
    res.write = (c, ...a) => {
      if (c && typeof c !== 'function') down += Buffer.byteLength(c);
      return write(c, ...a);
    };
    res.end = (c, ...a) => {
      if (c && typeof c !== 'function') down += Buffer.byteLength(c);
      return end(c, ...a);
    };
    res.on('finish', () => {
      const range = req.headers.range || '';
      out.write(JSON.stringify({ method: req.method, url: req.url, range, status: res.statusCode, up, down }) + '\n');
    });
  });
}

server.run().then(
  (addr) => {
    if (log) logRequests(server.httpServer, log);
    console.log(`listening ${addr.port}`);
  },
  (e) => {
    console.error(`s3 server: ${e.message}`);
    process.exit(1);
  },
);

'use strict';
// A local S3-compatible server on 127.0.0.1 (scripts/start-s3.sh): s3rver
// (the @20minutes fork, which checks SigV4 signatures), one bucket, one key
// pair besides s3rver's own S3RVER/S3RVER. Prints "listening PORT" once up.
// Usage: node --openssl-legacy-provider server.js DIR PORT BUCKET KEY SECRET
const S3rver = require('@20minutes/s3rver');
const { DUMMY_ACCOUNT } = require('@20minutes/s3rver/lib/models/account');

const [dir, port, bucket, key, secret] = process.argv.slice(2);
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
server.run().then(
  (addr) => console.log(`listening ${addr.port}`),
  (e) => {
    console.error(`s3 server: ${e.message}`);
    process.exit(1);
  },
);

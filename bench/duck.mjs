// Runs SQL statements in one in-memory DuckDB and prints the last one's rows
// as JSON (BigInts as numbers). Used by bench/*/run.sh.
import { DuckDBInstance } from '@duckdb/node-api';
const inst = await DuckDBInstance.create(':memory:', { threads: process.env.DUCK_THREADS || '2' });
const con = await inst.connect();
let rows = [];
for (const sql of process.argv.slice(2)) {
  const r = await con.runAndReadAll(sql);
  rows = r.getRowObjectsJson();
}
console.log(JSON.stringify(rows));

// The baseline: a bare Fastify route doing the same single query as the tower's route, no
// auth, no events. argv: sqlite <file> | postgres <url>
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import pg from 'pg';

const [kind, target] = process.argv.slice(2);
const app = Fastify();
let getDomain;
let insertTask;
if (kind === 'sqlite') {
  const db = new Database(target);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(
    'create table if not exists d (id text primary key, name text, description text, created_at text, updated_at text)',
  );
  db.exec('create table if not exists t (id text primary key, title text, created_at text)');
  db.prepare("insert or ignore into d values ('d1', 'bench', '', '', '')").run();
  const sel = db.prepare('select * from d where id = ?');
  const ins = db.prepare('insert into t values (?, ?, ?)');
  getDomain = async (id) => sel.get(id);
  insertTask = async (id, title) => ins.run(id, title, new Date().toISOString());
} else {
  const pool = new pg.Pool({ connectionString: target, max: 10 });
  await pool.query(
    'create table if not exists d (id text primary key, name text, description text, created_at text, updated_at text)',
  );
  await pool.query('create table if not exists t (id text primary key, title text, created_at text)');
  await pool.query("insert into d values ('d1', 'bench', '', '', '') on conflict do nothing");
  getDomain = async (id) => (await pool.query('select * from d where id = $1', [id])).rows[0];
  insertTask = async (id, title) =>
    pool.query('insert into t values ($1, $2, $3)', [id, title, new Date().toISOString()]);
}
let n = 0;
app.get('/domains/:id', async (req) => getDomain(req.params.id));
app.post('/t', async (req, reply) => {
  const id = `t${process.pid}_${n++}`;
  await insertTask(id, req.body.title);
  return reply.code(201).send({ id, title: req.body.title });
});
await app.listen({ host: '127.0.0.1', port: 0 });
console.log(`listening on http://127.0.0.1:${app.server.address().port}`);

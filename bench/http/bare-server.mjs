// The baseline: a bare Fastify route doing the same single query as the tower's route (the
// same SELECT by id, the same INSERT into a table shaped like the tower's, with its index),
// no auth, no events, no validation. argv: sqlite <file> | postgres <url>
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import pg from 'pg';

const [kind, target] = process.argv.slice(2);
// Shaped like the tower's board_tasks (same columns and secondary index).
const TASKS = `create table if not exists t (id text primary key, domain_id text not null, mission_id text not null,
  title text not null, description text default '' not null, status text not null, created_at text not null,
  updated_at text not null); create index if not exists t_mission on t (mission_id, id)`;
const INSERT =
  'insert into t (id, domain_id, mission_id, title, description, status, created_at, updated_at) values ($1, $2, $3, $4, $5, $6, $7, $8)';
const taskValues = (id, title) => {
  const now = new Date().toISOString();
  return [id, 'd1', 'm1', title, '', 'open', now, now];
};
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
  db.exec(TASKS);
  db.prepare("insert or ignore into d values ('d1', 'bench', '', '', '')").run();
  const sel = db.prepare('select * from d where id = ?');
  const ins = db.prepare(INSERT.replace(/\$\d+/g, '?'));
  getDomain = async (id) => sel.get(id);
  insertTask = async (id, title) => ins.run(...taskValues(id, title));
} else {
  const pool = new pg.Pool({ connectionString: target, max: 10 });
  await pool.query(
    'create table if not exists d (id text primary key, name text, description text, created_at text, updated_at text)',
  );
  await pool.query(TASKS.split(';')[0]);
  await pool.query(TASKS.split(';')[1]);
  await pool.query("insert into d values ('d1', 'bench', '', '', '') on conflict do nothing");
  getDomain = async (id) => (await pool.query('select * from d where id = $1', [id])).rows[0];
  insertTask = async (id, title) => pool.query(INSERT, taskValues(id, title));
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

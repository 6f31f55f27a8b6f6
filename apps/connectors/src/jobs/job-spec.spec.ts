import { SecretBox } from '@libs/security';
import { validateTableConfig } from '../connectors/postgres-table/table-config';
import { ConfigFieldError } from '../spi';
import { jobSpecOf, opened, sealed, shown, type ReconfiguredJob } from './job-spec';

const connection = { host: '127.0.0.1', database: 'shop', user: 'u', password: 'outbox-pass-9f3k2' };
const outbox = (config: Record<string, unknown>) => ({
  name: 'orders',
  kind: 'postgres-outbox',
  mesh: { apiKey: 'emk_a_b' },
  config: { connection, table: 'outbox', ...config },
});
const table = (config: Record<string, unknown>) => ({
  name: 'in',
  kind: 'postgres-table',
  config: { subscriptionId: 's', connection, table: 't', columns: { a: 'id' }, ...config },
});
const box = new SecretBox([{ id: 'k', key: Buffer.alloc(32, 1) }], 'k');
const refusal = (body: unknown, existing?: ReconfiguredJob) => {
  try {
    jobSpecOf(body, existing);
  } catch (e) {
    if (e instanceof ConfigFieldError) return e.field;
    throw e;
  }
  throw new Error('accepted');
};

describe('job spec: validation names the field; secrets sealed at rest', () => {
  it.each([
    [{ ...outbox({}), name: 'Bad Name' }, 'name'],
    [{ ...outbox({}), kind: 'kafka' }, 'kind'],
    [outbox({ columns: { id: 'id; DROP TABLE x' } }), 'config.columns.id'],
    [outbox({ table: 'a.b.c' }), 'config.table'],
    [outbox({ table: 'connectors.jobs' }), 'config.table'],
    [outbox({ connection: { ...connection, port: 0 } }), 'config.connection.port'],
    [outbox({ batchSize: 0 }), 'config.batchSize'],
    [
      {
        name: 'in',
        kind: 'postgres-table',
        config: { subscriptionId: 's', connection, table: 't', columns: { a: 'nope' } },
      },
      'config.columns.a',
    ],
    [
      {
        name: 'in',
        kind: 'postgres-table',
        config: { subscriptionId: 's', connection, table: 't', mode: 'upsert', columns: { a: 'id' } },
      },
      'config.key',
    ],
    // The key's columns are the mapping's own, each once, and only an upsert has a key.
    [table({ mode: 'upsert', key: ['constructor'] }), 'config.key.0'],
    [table({ mode: 'upsert', key: ['__proto__'] }), 'config.key.0'],
    [table({ mode: 'upsert', key: ['a', 'a'] }), 'config.key.1'],
    [table({ key: ['a'] }), 'config.key'],
    [table({ mode: 'upsert', key: 'a' }), 'config.key'],
    // The config itself missing or not an object: `config`, as the body names it.
    [{ ...outbox({}), config: undefined }, 'config'],
    [{ ...outbox({}), config: [] }, 'config'],
    // "(sealed)" stands for a stored secret: a new job has none.
    [outbox({ connection: { ...connection, password: '(sealed)' } }), 'config.connection.password'],
    [{ ...outbox({}), mesh: { apiKey: '(sealed)' } }, 'mesh.apiKey'],
    [{ ...outbox({}), mesh: { token: '(sealed)' } }, 'mesh.token'],
  ])('refuses %j naming %s', (body, field) => {
    expect(refusal(body)).toBe(field);
  });

  it("a column named __proto__ (a JSON body's own key) is a column like any other, and can be the key", () => {
    const config = validateTableConfig(
      JSON.parse(
        '{"subscriptionId":"s","connection":{"host":"h","database":"d","user":"u","password":"p"},"table":"t","mode":"upsert","key":["__proto__"],"columns":{"__proto__":"id","b":"type"}}',
      ),
    );
    expect(Object.keys(config.columns)).toEqual(['__proto__', 'b']);
    expect(Object.getOwnPropertyDescriptor(config.columns, '__proto__')?.value).toBe('id');
    expect(Object.getPrototypeOf(config.columns)).toBe(Object.prototype);
    expect(config.key).toEqual(['__proto__']);
  });

  it("a reconfigure cannot change the job's kind or name: refused naming the field", () => {
    const stored = sealed(jobSpecOf(outbox({})), box);
    const existing = { name: 'orders', kind: 'postgres-outbox', stored, box };
    expect(refusal({ ...outbox({}), kind: 'postgres-table' }, existing)).toBe('kind');
    expect(refusal({ ...outbox({}), name: 'invoices' }, existing)).toBe('name');
    // The same kind and name, or none given: a reconfigure.
    expect(jobSpecOf(outbox({ batchSize: 9 }), existing).config).toMatchObject({ batchSize: 9 });
    expect(jobSpecOf({ mesh: { apiKey: 'k' }, config: outbox({}).config }, existing).name).toBe('orders');
  });

  it('a reconfigure with the spec GET shows, "(sealed)" secrets sent back, keeps the stored password and credential', () => {
    const stored = sealed(jobSpecOf(outbox({})), box);
    const existing = { name: 'orders', kind: 'postgres-outbox', stored, box };
    const shownSpec = shown(stored, jobSpecOf(outbox({})).kind) as {
      mesh: Record<string, string>;
      config: Record<string, unknown>;
    };
    const edited = { mesh: shownSpec.mesh, config: { ...shownSpec.config, batchSize: 7 } };
    const spec = jobSpecOf(edited, existing);
    expect(spec.mesh).toEqual({ apiKey: 'emk_a_b', token: undefined });
    expect(opened(sealed(spec, box), spec.kind, box)).toEqual({
      mesh: { apiKey: 'emk_a_b' },
      config: { connection, table: 'outbox', batchSize: 7 },
    });
    // A placeholder for a secret the job has not stored (a token where it holds an API key) keeps nothing.
    expect(refusal({ ...edited, mesh: { token: '(sealed)' } }, existing)).toBe('mesh.token');
  });

  it('stores the password and the mesh credential sealed, shows them as (sealed), and opens them for the run', () => {
    const spec = jobSpecOf(outbox({}));
    const stored = sealed(spec, box);
    expect(JSON.stringify(stored)).not.toContain('outbox-pass-9f3k2');
    expect(JSON.stringify(stored)).not.toContain('emk_a_b');
    expect(shown(stored, spec.kind)).toMatchObject({
      mesh: { apiKey: '(sealed)' },
      config: { connection: { password: '(sealed)' } },
    });
    expect(opened(stored, spec.kind, box)).toEqual({ mesh: { apiKey: 'emk_a_b' }, config: spec.raw });
  });
});

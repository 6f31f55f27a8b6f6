import { SecretBox } from '@libs/security';
import { ConfigFieldError } from '../spi';
import { jobSpecOf, opened, sealed, shown } from './job-spec';

const connection = { host: '127.0.0.1', database: 'shop', user: 'u', password: 'outbox-pass-9f3k2' };
const outbox = (config: Record<string, unknown>) => ({
  name: 'orders',
  kind: 'postgres-outbox',
  mesh: { apiKey: 'emk_a_b' },
  config: { connection, table: 'outbox', ...config },
});
const refusal = (body: unknown) => {
  try {
    jobSpecOf(body);
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
  ])('refuses %j naming %s', (body, field) => {
    expect(refusal(body)).toBe(field);
  });

  it('stores the password and the mesh credential sealed, shows them as (sealed), and opens them for the run', () => {
    const box = new SecretBox([{ id: 'k', key: Buffer.alloc(32, 1) }], 'k');
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

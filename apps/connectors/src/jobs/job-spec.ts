import { SecretBox } from '@libs/security';
import { CONNECTOR_KINDS } from '../connectors';
import { object, optionalText, text } from '../connectors/config-fields';
import { ConfigFieldError, ConnectorKind } from '../spi';

/** The credential a job's calls to the event runtime carry (its tenant's API key or token), sealed at rest. */
export interface MeshCredential {
  apiKey?: string;
  token?: string;
}

/** A job as created: `POST /admin/jobs` `{ name, kind, mesh, config }`. */
export interface JobSpec {
  name: string;
  kind: ConnectorKind<unknown>;
  mesh: MeshCredential;
  /** The config as given: what is stored (secrets sealed) and validated again by every run. */
  raw: unknown;
  /** The config as validated, with its defaults. */
  config: unknown;
}

/** What the admin API shows for a stored secret; sent back in a reconfigure, it keeps the stored one. */
export const SEALED = '(sealed)';

/** The job a reconfigure changes: its name and kind, which stay, and its stored spec, whose secrets `(sealed)` keeps. */
export interface ReconfiguredJob {
  name: string;
  kind: string;
  stored: Record<string, unknown>;
  box: SecretBox;
}

const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

/**
 * Reads and validates a create body, or with `existing` a reconfigure body (`name` and `kind` may be given, as the
 * job has them; a secret given as {@link SEALED} is the job's stored one); throws {@link ConfigFieldError}.
 */
export function jobSpecOf(body: unknown, existing?: ReconfiguredJob): JobSpec {
  const o = object(body, 'body');
  for (const field of ['name', 'kind'] as const)
    if (existing && o[field] !== undefined && o[field] !== existing[field])
      throw new ConfigFieldError(
        field,
        `cannot change (the job's is ${existing[field]}); delete the job and create another`,
      );
  const name = existing?.name ?? text(o, '', 'name');
  if (!NAME.test(name)) throw new ConfigFieldError('name', 'expected lower-case letters, digits and -, at most 63');
  const kindName = existing?.kind ?? text(o, '', 'kind');
  const kind = CONNECTOR_KINDS.get(kindName);
  if (!kind) throw new ConfigFieldError('kind', `expected one of ${[...CONNECTOR_KINDS.keys()].join(', ')}`);
  const stored = (path: string) => storedSecret(existing, path, kind);
  const m = o.mesh === undefined ? {} : object(o.mesh, 'mesh');
  const mesh = {
    apiKey: kept(optionalText(m, 'mesh', 'apiKey'), 'mesh.apiKey', stored),
    token: kept(optionalText(m, 'mesh', 'token'), 'mesh.token', stored),
  };
  if (mesh.apiKey && mesh.token) throw new ConfigFieldError('mesh', 'give apiKey or token, not both');
  // The connector reads its config from its root and names a wrong one `config`, as the body does.
  object(o.config, 'config');
  const raw = mapSecrets(o.config, kind.secretFields, (v, path) => kept(v, `config.${path}`, stored)!);
  let config: unknown;
  try {
    config = kind.validate(raw);
  } catch (e) {
    // The connector names fields from its config's root; the body nests them under `config`.
    if (e instanceof ConfigFieldError)
      throw new ConfigFieldError(`config.${e.field}`, e.message.replace(/^[^:]*: /, ''));
    throw e;
  }
  return { name, kind, mesh, raw, config };
}

/** `value`, or for {@link SEALED} the stored secret at `field`; refused when there is none (a create has none). */
function kept(
  value: string | undefined,
  field: string,
  stored: (path: string) => string | undefined,
): string | undefined {
  if (value !== SEALED) return value;
  const secret = stored(field);
  if (secret === undefined)
    throw new ConfigFieldError(
      field,
      `${SEALED} stands for a secret the job holds, and it holds none here; give the secret`,
    );
  return secret;
}

/** The secret a reconfigured job holds at `field` (`mesh.token`, `config.connection.password`), opened. */
function storedSecret(existing: ReconfiguredJob | undefined, field: string, kind: ConnectorKind<unknown>) {
  if (!existing) return undefined;
  const { mesh, config } = opened(existing.stored, kind, existing.box);
  const [root, ...path] = field.split('.');
  let at: unknown = root === 'mesh' ? mesh : config;
  for (const k of path)
    at = typeof at === 'object' && at !== null && Object.hasOwn(at, k) ? (at as Record<string, unknown>)[k] : undefined;
  return typeof at === 'string' ? at : undefined;
}

/** The spec as stored: every secret field (the mesh credential, the connector's own) sealed with `box`. */
export function sealed(spec: JobSpec, box: SecretBox): Record<string, unknown> {
  const mesh = Object.fromEntries(
    Object.entries(spec.mesh)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => [k, box.seal(v as string)]),
  );
  return { mesh, config: mapSecrets(spec.raw, spec.kind.secretFields, (v) => box.seal(v)) };
}

/** The stored spec with its secrets opened, for the job's run (never for an answer of the admin API). */
export function opened(stored: Record<string, unknown>, kind: ConnectorKind<unknown>, box: SecretBox) {
  const mesh = Object.fromEntries(
    Object.entries((stored.mesh ?? {}) as Record<string, string>).map(([k, v]) => [k, box.open(v)]),
  ) as MeshCredential;
  return { mesh, config: mapSecrets(stored.config, kind.secretFields, (v) => box.open(v)) };
}

/** The stored spec as the admin API shows it: secrets replaced by `"(sealed)"`. */
export function shown(
  stored: Record<string, unknown>,
  kind: ConnectorKind<unknown> | undefined,
): Record<string, unknown> {
  const mesh = Object.fromEntries(Object.keys((stored.mesh ?? {}) as object).map((k) => [k, SEALED]));
  return { mesh, config: mapSecrets(stored.config, kind?.secretFields ?? [], () => SEALED) };
}

/** A copy of `config` with each secret field's string (at `paths`) replaced by `f` of it. */
function mapSecrets(config: unknown, paths: readonly string[], f: (v: string, path: string) => string): unknown {
  const copy = structuredClone(config) as Record<string, unknown>;
  for (const path of paths) {
    const keys = path.split('.');
    let at: Record<string, unknown> | undefined = copy;
    for (const k of keys.slice(0, -1)) at = at?.[k] as Record<string, unknown> | undefined;
    const last = keys[keys.length - 1];
    if (at && typeof at[last] === 'string') at[last] = f(at[last] as string, path);
  }
  return copy;
}

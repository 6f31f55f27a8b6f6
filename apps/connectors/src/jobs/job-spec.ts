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

const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** Reads and validates a create (or, with `kind` given, a reconfigure) body; throws {@link ConfigFieldError}. */
export function jobSpecOf(body: unknown, existing?: { name: string; kind: string }): JobSpec {
  const o = object(body, 'body');
  const name = existing?.name ?? text(o, '', 'name');
  if (!NAME.test(name)) throw new ConfigFieldError('name', 'expected lower-case letters, digits and -, at most 63');
  const kindName = existing?.kind ?? text(o, '', 'kind');
  const kind = CONNECTOR_KINDS.get(kindName);
  if (!kind) throw new ConfigFieldError('kind', `expected one of ${[...CONNECTOR_KINDS.keys()].join(', ')}`);
  const m = o.mesh === undefined ? {} : object(o.mesh, 'mesh');
  const mesh = { apiKey: optionalText(m, 'mesh', 'apiKey'), token: optionalText(m, 'mesh', 'token') };
  if (mesh.apiKey && mesh.token) throw new ConfigFieldError('mesh', 'give apiKey or token, not both');
  let config: unknown;
  try {
    config = kind.validate(o.config);
  } catch (e) {
    // The connector names fields from its config's root; the body nests them under `config`.
    if (e instanceof ConfigFieldError)
      throw new ConfigFieldError(`config.${e.field}`, e.message.replace(/^[^:]*: /, ''));
    throw e;
  }
  return { name, kind, mesh, raw: o.config, config };
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
  const mesh = Object.fromEntries(Object.keys((stored.mesh ?? {}) as object).map((k) => [k, '(sealed)']));
  return { mesh, config: mapSecrets(stored.config, kind?.secretFields ?? [], () => '(sealed)') };
}

function mapSecrets(config: unknown, paths: readonly string[], f: (v: string) => string): unknown {
  const copy = structuredClone(config) as Record<string, unknown>;
  for (const path of paths) {
    const keys = path.split('.');
    let at: Record<string, unknown> | undefined = copy;
    for (const k of keys.slice(0, -1)) at = at?.[k] as Record<string, unknown> | undefined;
    const last = keys[keys.length - 1];
    if (at && typeof at[last] === 'string') at[last] = f(at[last] as string);
  }
  return copy;
}

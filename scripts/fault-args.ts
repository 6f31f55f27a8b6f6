/** `--name value` or `--name=value` from the command line, else the default. */
export function flag(name: string, fallback: string): string {
  const args = process.argv.slice(2);
  for (let i = 0; i < args.length; i++) {
    if (args[i] === `--${name}`) return args[i + 1] ?? fallback;
    if (args[i].startsWith(`--${name}=`)) return args[i].slice(name.length + 3);
  }
  return fallback;
}

/**
 * The database and Temporal namespace of a chaos or soak run (scripts/faults.sh sets them), which override the
 * test settings the instance processes otherwise get. With FAULTS_LOG_DIR set, each instance's output is written
 * there at the end of the run.
 */
export function runSettings(): Record<string, string> {
  return {
    EVENTMESH_POSTGRES_DATABASE: process.env.EVENTMESH_POSTGRES_DATABASE ?? 'eventmesh_faults',
    EVENTMESH_TEMPORAL_NAMESPACE: process.env.EVENTMESH_TEMPORAL_NAMESPACE ?? 'default',
    // The instances log warnings and errors only, unless FAULTS_INSTANCE_LOG_LEVEL says otherwise.
    ...(process.env.FAULTS_INSTANCE_LOG_LEVEL ? { EVENTMESH_LOG_LEVEL: process.env.FAULTS_INSTANCE_LOG_LEVEL } : {}),
  };
}

/** Ends the process with the run's exit code (1: something acknowledged was lost), or 2 when the run itself failed. */
export function exitWith(run: Promise<number>): void {
  run.then(
    (code) => process.exit(code),
    (e: unknown) => {
      console.error(e);
      process.exit(2);
    },
  );
}

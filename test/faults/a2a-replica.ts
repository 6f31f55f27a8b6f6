/**
 * One replica of a mesh-subscriber A2A agent, run as its own process so that SIGKILL is a real crash: nothing is
 * answered, acked or closed on its way out. It long-polls the agent's subscription (`window` deliveries at most),
 * works on each task it receives for `workMs` (posting `working`, then `completed` with an artifact), and acks what
 * it finished in one batch every `ackEveryMs`. A `working` update answered 409 means the task already ended (another
 * replica finished it): the delivery is acked and the task not worked on. Every step is a JSON line on stdout, which
 * test/faults/a2a-tasks.e2e-spec.ts reads. Only Node built-ins: the spec transpiles this file and runs it with node.
 *
 * Settings (environment): REPLICA_MESH_URL, REPLICA_AGENT, REPLICA_SUBSCRIPTION, REPLICA_NAME, REPLICA_WINDOW,
 * REPLICA_WORK_MS, REPLICA_ACK_EVERY_MS.
 */

export {};

interface Delivery {
  deliveryId: string;
  event: { a2ataskid: string };
}

interface Answer {
  deliveryId: string;
  task: string;
  action: 'ack' | 'nack';
}

function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

const mesh = setting('REPLICA_MESH_URL');
const agent = setting('REPLICA_AGENT');
const subscription = setting('REPLICA_SUBSCRIPTION');
const name = setting('REPLICA_NAME');
const windowSize = Number(setting('REPLICA_WINDOW'));
const workMs = Number(setting('REPLICA_WORK_MS'));
const ackEveryMs = Number(setting('REPLICA_ACK_EVERY_MS'));

const say = (line: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ replica: name, at: Date.now(), ...line })}\n`);
const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> | null }> {
  const response = await fetch(`${mesh}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10000),
  });
  const text = await response.text();
  let parsed: Record<string, unknown> | null = null;
  try {
    parsed = text === '' ? null : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    parsed = { text: text.slice(0, 200) };
  }
  return { status: response.status, body: parsed };
}

const answers: Answer[] = [];
const update = (task: string, body: unknown) => call('POST', `/a2a/agents/${agent}/tasks/${task}/updates`, body);

async function work(d: Delivery): Promise<void> {
  const task = d.event.a2ataskid;
  say({ event: 'received', task });
  try {
    const working = await update(task, { state: 'TASK_STATE_WORKING' });
    if (working.status === 409) {
      say({ event: 'ended', task, state: working.body?.state });
      answers.push({ deliveryId: d.deliveryId, task, action: 'ack' });
      return;
    }
    if (working.status !== 200) throw new Error(`working: ${working.status} ${JSON.stringify(working.body)}`);
    await pause(workMs);
    // Said before the update: a kill between the mesh's answer and the line after it leaves this one.
    say({ event: 'completing', task });
    const done = await update(task, {
      state: 'TASK_STATE_COMPLETED',
      artifacts: [{ artifactId: `${task}-${name}`, name: 'result', parts: [{ text: `done by ${name}` }] }],
    });
    say({ event: 'completed', task, status: done.status, code: done.body?.code });
    answers.push({ deliveryId: d.deliveryId, task, action: 'ack' });
  } catch (e) {
    // Not recorded (the mesh did not answer): delivered again later, to this replica or another.
    say({ event: 'failed', task, error: (e as Error).message });
    answers.push({ deliveryId: d.deliveryId, task, action: 'nack' });
  }
}

async function flushAnswers(): Promise<void> {
  const batch = answers.splice(0, answers.length);
  if (batch.length === 0) return;
  const answered = await call(
    'POST',
    `/subscriptions/${subscription}/acks`,
    batch.map((a) => ({
      deliveryId: a.deliveryId,
      action: a.action,
      ...(a.action === 'nack' ? { delayMs: 500 } : {}),
    })),
  ).catch((e: Error) => ({ status: 0, body: { error: e.message } }));
  say({
    event: 'answered',
    status: answered.status,
    acked: batch.filter((a) => a.action === 'ack').map((a) => a.task),
    nacked: batch.filter((a) => a.action === 'nack').map((a) => a.task),
  });
}

async function main(): Promise<void> {
  // The registration this replica runs under: a re-registration of the agent fences its heartbeats (409).
  // (An expired card is not served: the replica then beats as the current registration's.)
  const registration = (await call('GET', `/a2a/agents/${agent}`)).body?.registration;
  const beat = () =>
    call('POST', `/a2a/agents/${agent}/heartbeat`, typeof registration === 'number' ? { registration } : undefined);
  setInterval(() => void beat().catch(() => undefined), 1000);
  setInterval(() => void flushAnswers(), ackEveryMs);
  await beat();
  let first = true;
  for (;;) {
    try {
      const polled = await call(
        'GET',
        `/subscriptions/${subscription}/poll?consumer=${name}&window=${windowSize}&max=${windowSize}&waitMs=500`,
      );
      if (polled.status !== 200) throw new Error(`poll: ${polled.status} ${JSON.stringify(polled.body)}`);
      if (first) say({ event: 'polling' });
      first = false;
      for (const d of (polled.body?.deliveries ?? []) as Delivery[]) void work(d);
    } catch (e) {
      say({ event: 'poll-failed', error: (e as Error).message });
      await pause(200);
    }
  }
}

void main();

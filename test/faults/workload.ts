import type { PublishRecord } from './checker';

export interface WorkloadOptions {
  /** The gateways to publish to now (each attempt picks one at random); empty = wait. */
  targets: () => string[];
  topic: string;
  /** Publishers, each publishing one event at a time and waiting for its answer. */
  publishers: number;
  /** Keys per publisher: each key's events carry seq 1, 2, 3... in publish order. */
  keysPerPublisher: number;
  /** Events per second over all publishers; unbounded (as fast as answers come) when absent. */
  ratePerSecond?: number;
  /** Client deadline of one publish attempt; no answer by then is not an acknowledgement. */
  attemptTimeoutMs?: number;
  /** Attempts of one event (same id) before the publisher gives up on it and goes on. */
  attempts?: number;
  /** A prefix for event ids, unique per run. */
  runId: string;
}

interface Entry extends PublishRecord {
  attempts: number;
  /** Answer of each attempt: an HTTP status, `timeout` or `error`. */
  answers: string[];
}

/**
 * N publishers with unique event ids and per-key sequence numbers: CloudEvents with a `partitionkey` extension
 * (the Kafka record key, so one key's events share a partition) and a `seq` extension. Every answer is recorded:
 * 202 is an acknowledgement; anything else is not, and the event is published again with the same id (at most
 * `attempts` times) before the publisher goes on to the next.
 */
export class Workload {
  private readonly entries = new Map<string, Entry>();
  private stopping = false;
  private running: Promise<void>[] = [];
  /** Answers seen, by status (`202`, `503`, `timeout`, `error`, ...). */
  readonly answers: Record<string, number> = {};
  /** Refusals (an answer other than 202 with an error body), by `status code`, e.g. `503 KAFKA_UNAVAILABLE`. */
  readonly refusals: Record<string, number> = {};
  /** The longest time any publish attempt waited for its answer (timeouts and errors excluded), in ms. */
  slowestAnswerMs = 0;

  constructor(private readonly options: WorkloadOptions) {}

  start(): void {
    this.running = Array.from({ length: this.options.publishers }, (_, p) => this.publisher(p));
  }

  /** Stops publishing; resolves when every publisher has its last answer (bounded by the attempt deadline). */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.running);
  }

  /** The publish log for the checker: one record per event id. */
  log(): PublishRecord[] {
    return [...this.entries.values()].map(({ id, key, seq, acknowledged }) => ({ id, key, seq, acknowledged }));
  }

  get acknowledged(): number {
    let n = 0;
    for (const e of this.entries.values()) if (e.acknowledged) n++;
    return n;
  }

  get published(): number {
    return this.entries.size;
  }

  /** Ids of events acknowledged so far. */
  acknowledgedIds(): string[] {
    return [...this.entries.values()].filter((e) => e.acknowledged).map((e) => e.id);
  }

  /** Entries with an answer of the given kind on some attempt. */
  withAnswer(answer: string): Entry[] {
    return [...this.entries.values()].filter((e) => e.answers.includes(answer));
  }

  private async publisher(p: number): Promise<void> {
    const { keysPerPublisher, ratePerSecond, publishers } = this.options;
    const seqs = new Array<number>(keysPerPublisher).fill(0);
    const intervalMs = ratePerSecond ? (1000 * publishers) / ratePerSecond : 0;
    let next = Date.now();
    for (let n = 0; !this.stopping; n++) {
      const k = n % keysPerPublisher;
      const entry: Entry = {
        id: `${this.options.runId}-p${p}-${n}`,
        key: `${this.options.runId}-p${p}-k${k}`,
        seq: ++seqs[k],
        acknowledged: false,
        attempts: 0,
        answers: [],
      };
      this.entries.set(entry.id, entry);
      await this.publishOne(entry);
      if (intervalMs > 0) {
        next += intervalMs;
        const wait = next - Date.now();
        if (wait > 0) await sleep(wait);
        else if (wait < -1000) next = Date.now(); // fell behind (a fault): do not burst to catch up
      }
    }
  }

  private async publishOne(entry: Entry): Promise<void> {
    const attempts = this.options.attempts ?? 3;
    const timeoutMs = this.options.attemptTimeoutMs ?? 10000;
    const body = JSON.stringify({
      specversion: '1.0',
      id: entry.id,
      source: '/faults',
      type: 'faults.event',
      partitionkey: entry.key,
      seq: entry.seq,
      data: { seq: entry.seq },
    });
    while (entry.attempts < attempts && !entry.acknowledged) {
      const targets = this.options.targets();
      if (targets.length === 0) {
        if (this.stopping) return;
        await sleep(100);
        continue;
      }
      entry.attempts++;
      const target = targets[Math.floor(Math.random() * targets.length)];
      let answer: string;
      let retryAfterMs = 200;
      const sentAt = performance.now();
      try {
        const response = await fetch(`${target}/events/publish?topic=${this.options.topic}`, {
          method: 'POST',
          headers: { 'content-type': 'application/cloudevents+json' },
          body,
          signal: AbortSignal.timeout(timeoutMs),
        });
        answer = String(response.status);
        const retryAfter = Number(response.headers.get('retry-after'));
        if (retryAfter > 0) retryAfterMs = Math.min(1000, retryAfter * 1000);
        const text = await response.text();
        this.slowestAnswerMs = Math.max(this.slowestAnswerMs, performance.now() - sentAt);
        if (response.status === 202) entry.acknowledged = true;
        else {
          const refusal = `${response.status} ${codeOf(text)}`;
          this.refusals[refusal] = (this.refusals[refusal] ?? 0) + 1;
        }
      } catch (e) {
        answer = (e as Error).name === 'TimeoutError' ? 'timeout' : 'error';
      }
      entry.answers.push(answer);
      this.answers[answer] = (this.answers[answer] ?? 0) + 1;
      if (!entry.acknowledged && entry.attempts < attempts && !this.stopping) await sleep(retryAfterMs);
    }
  }
}

/** The `code` of an error body ({code, message}), or `-` when the body is not one. */
function codeOf(body: string): string {
  try {
    return String((JSON.parse(body) as { code?: unknown }).code ?? '-');
  } catch {
    return '-';
  }
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

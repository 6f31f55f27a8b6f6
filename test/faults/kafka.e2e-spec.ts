import { CI_LOAD, FaultRun } from './fault-run';
import { expectNothingLost } from './expect-run';
import { reportCase } from './report';
import { killKafka, restoreServers, startKafka } from './servers';
import { waitFor } from '../support/wait-for';

/**
 * Kafka faults under publish load (docs/failure-matrix.md): the link to the broker cut or slow, and the broker
 * killed (`kill -9`) and restarted. Nothing acknowledged (202) may be lost, and publishing resumes after the fault.
 */
describe('faults: Kafka', () => {
  let run: FaultRun | undefined;
  afterEach(async () => {
    await run?.close();
    run = undefined;
  });

  it('cut under publish load: no 202 while the link is down, publishing resumes after heal, nothing acknowledged is lost', async () => {
    run = new FaultRun({
      name: 'kafka-cut',
      instances: [{ kafkaViaProxy: true }],
      subscribers: [{ transport: 'webhook' }, { transport: 'websocket' }],
      ...CI_LOAD,
    });
    await run.start();
    await run.acknowledgedMore(100);
    run.kafka!.cut();
    const cutAt = Date.now();
    // A publish answered in the instant of the cut may still be a 202; after a second none can be.
    await waitFor('a second after the cut', () => Date.now() - cutAt >= 1000);
    const acknowledgedAfterCut = run.workload.acknowledged;
    const answersBefore = { ...run.workload.answers };
    await waitFor(
      'refused or unanswered publishes during the cut',
      () => {
        const refused = Object.entries(run!.workload.answers).reduce(
          (n, [a, c]) => (a === '202' ? n : n + c - (answersBefore[a] ?? 0)),
          0,
        );
        return refused >= 4 && Date.now() - cutAt >= 6000;
      },
      { timeoutMs: 30000 },
    );
    expect(run.workload.acknowledged).toBe(acknowledgedAfterCut);
    run.kafka!.heal();
    await run.acknowledgedMore(100, 40000);
    const result = await run.finish(40000);
    reportCase('Kafka link cut 6 s (proxy), 1 instance, 100/s', result);
    expectNothingLost(result);
  }, 150000);

  it('slow (+2 s each way through the proxy) for 10 s under load: every publish answered by its deadline, 202 or 503 KAFKA_UNAVAILABLE; delivery catches up; nothing acknowledged is lost', async () => {
    // A deadline shorter than a produce round trip through the slow link (2 s up, 2 s down): the deadline, not
    // the broker, decides when a publish is answered.
    const publishTimeoutMs = 2500;
    run = new FaultRun({
      name: 'kafka-slow',
      instances: [{ kafkaViaProxy: true }],
      subscribers: [{ transport: 'webhook' }, { transport: 'websocket' }],
      publishers: 4,
      ratePerSecond: 100,
      attemptTimeoutMs: 10000,
      env: { EVENTMESH_KAFKA_PUBLISH_TIMEOUT_MS: String(publishTimeoutMs) },
    });
    await run.start();
    await run.acknowledgedMore(100);
    run.kafka!.latency(2000);
    const slowAt = Date.now();
    await waitFor('10 s of slowness', () => Date.now() - slowAt >= 10000, { timeoutMs: 60000 });
    run.kafka!.heal();
    await run.acknowledgedMore(100, 40000);
    const result = await run.finish(60000);
    const { refusals, slowestAnswerMs } = run.workload;
    reportCase(
      'Kafka +2 s each way for 10 s (proxy), publish deadline 2.5 s, 1 instance, 100/s',
      result,
      `refusals ${JSON.stringify(refusals)}; slowest answer ${Math.round(slowestAnswerMs)} ms`,
    );
    expectNothingLost(result);
    // Every attempt was answered (no client timeout), by the publish deadline, with 202 or 503 KAFKA_UNAVAILABLE.
    expect(Object.keys(result.answers).filter((a) => a !== '202' && a !== '503')).toEqual([]);
    expect(Object.keys(refusals)).toEqual(['503 KAFKA_UNAVAILABLE']);
    // The publish deadline is the promise, so the answer time is asserted. It is measured by the publishers (the
    // instance's own histogram has no bucket between 2.5 s and 5 s), so it includes the instance's and this
    // process's timer lateness under load: the 1.2 s margin is for that, and is the widest that still fails a
    // publish answered by the broker rather than the deadline (2 s up + 2 s down through the slow link, 4 s).
    expect(slowestAnswerMs).toBeLessThan(publishTimeoutMs + 1200);
  }, 210000);

  it('open connections to the broker stranded (silent for good, new ones pass) under load: publishing and delivery resume on new connections, nothing acknowledged is lost', async () => {
    const requestTimeoutMs = 3000;
    run = new FaultRun({
      name: 'kafka-strand',
      instances: [{ kafkaViaProxy: true }],
      subscribers: [{ transport: 'webhook' }, { transport: 'websocket' }],
      ...CI_LOAD,
      env: { EVENTMESH_KAFKA_REQUEST_TIMEOUT_MS: String(requestTimeoutMs) },
    });
    await run.start();
    await run.acknowledgedMore(100);
    const acknowledgedBefore = run.workload.acknowledged;
    run.kafka!.strand();
    const strandedAt = Date.now();
    // Publishing resumes: the producer gives up the silent connections and opens new ones.
    await run.acknowledgedMore(100, 40000);
    const resumedMs = Date.now() - strandedAt;
    // Delivery resumes: the dispatch loop's reader does the same (libs/kafka/partition-reader.ts), so everything
    // acknowledged after the strand reaches the sinks too.
    const result = await run.finish(40000);
    reportCase(
      `Kafka connections stranded (proxy), request timeout ${requestTimeoutMs / 1000} s, 1 instance, 100/s`,
      result,
      `100 more acknowledged ${resumedMs} ms after the strand (${acknowledgedBefore} before it); stranded connections still open: ${run.kafka!.strandedOpen}`,
    );
    expectNothingLost(result);
  }, 150000);

  it('broker kill -9 and restart under load: nothing acknowledged is lost, delivery resumes', async () => {
    run = new FaultRun({
      name: 'kafka-kill',
      instances: [{}],
      subscribers: [{ transport: 'webhook' }, { transport: 'long-poll' }],
      ...CI_LOAD,
    });
    try {
      await run.start();
      await run.acknowledgedMore(100);
      await killKafka();
      await startKafka();
      await run.acknowledgedMore(100, 60000);
      const result = await run.finish(60000);
      reportCase('Kafka broker kill -9 + restart, 1 instance, 100/s', result);
      expectNothingLost(result, { order: false });
    } finally {
      await restoreServers();
    }
  }, 240000);
});

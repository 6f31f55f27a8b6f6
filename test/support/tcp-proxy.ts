import { FaultProxy } from '../faults/fault-proxy';

/**
 * A TCP proxy on a loopback port in front of one server: the link between one instance and that server, which a
 * test can cut (every open connection is dropped and new ones are refused) and heal. It listens on a free port,
 * or on `listenPort` when given (the Kafka fault listener advertises 127.0.0.1:9095: a proxy there, forwarding to
 * 127.0.0.1:9094, carries every request of a client that bootstraps at 127.0.0.1:9095). The fault proxy of
 * test/faults with its default options; it also offers latency, half-open hold and reset.
 */
export class TcpProxy extends FaultProxy {
  constructor(targetHost: string, targetPort: number, listenPort = 0) {
    super(targetHost, targetPort, { listenPort });
  }
}

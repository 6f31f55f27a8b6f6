import { FaultProxy } from '../faults/fault-proxy';

/**
 * A TCP proxy on a free loopback port in front of one server: the link between one instance and that server,
 * which a test can cut (every open connection is dropped and new ones are refused) and heal. The fault proxy of
 * test/faults with its default options; it also offers latency, half-open hold and reset.
 */
export class TcpProxy extends FaultProxy {
  constructor(targetHost: string, targetPort: number) {
    super(targetHost, targetPort);
  }
}

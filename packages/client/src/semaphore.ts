/** At most `size` holders at once; `acquire` waits first come, first served. */
export class Semaphore {
  private held = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly size: number) {}

  async acquire(): Promise<void> {
    if (this.held < this.size) {
      this.held++;
      return;
    }
    await new Promise<void>((go) => this.waiting.push(go));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held--;
  }
}

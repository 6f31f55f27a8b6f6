import 'reflect-metadata';
import { runMain } from './run-main';

// A dispatch-only process: the Temporal worker of an instance, without the HTTP gateway.
void runMain(['worker']);

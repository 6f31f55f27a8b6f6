import 'reflect-metadata';
import { runMain } from './run-main';

// One runtime instance: the HTTP gateway and its Temporal worker (EVENTMESH_INSTANCE_ROLES narrows it).
void runMain();

import 'reflect-metadata';
// First: it replaces parts of kafkajs before any module loads it.
import './kafkajs-first';
import { runMain } from './run-main';

// One runtime instance: the HTTP gateway and its Temporal worker (EVENTMESH_INSTANCE_ROLES narrows it).
void runMain();

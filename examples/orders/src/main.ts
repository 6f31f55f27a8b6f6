import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppModule } from './app.module';

async function main() {
  const app = await NestFactory.create<NestFastifyApplication>(AppModule, new FastifyAdapter());
  // SIGTERM/SIGINT close the app: the mesh handlers drain (finish and ack what they hold), then the client closes.
  app.enableShutdownHooks();
  await app.listen(Number(process.env.PORT ?? 3100), '127.0.0.1');
  console.log(`orders example listening on ${await app.getUrl()}`);
}

void main();

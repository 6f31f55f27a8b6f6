// The epoch fence lives in libs/fence (shared with apps/connectors); the storage files import it from here.
export * from '@libs/fence';

export * from './topic-namespace';

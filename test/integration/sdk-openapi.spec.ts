import { readFileSync } from 'node:fs';
import path from 'node:path';
import { openApiFileText, servedOpenApiDocument } from '../../scripts/write-sdk-openapi';
import { testEnv, uniqueTopic } from '../support/env';

/**
 * The SDK's types are generated from packages/client/openapi.json (`npm run sdk:openapi`). This fails when the
 * gateway serves another document than the one committed there, so a route or schema change that the SDK has not
 * been regenerated for is caught (packages/client/src/generated/api.spec.ts holds the generated file to the document).
 */
describe("the SDK's API document", () => {
  it('is the document a booted gateway serves', async () => {
    const served = await servedOpenApiDocument(testEnv({ EVENTMESH_KAFKA_TOPICS: uniqueTopic('sdk-openapi') }));
    const committed = readFileSync(path.resolve(__dirname, '../../packages/client/openapi.json'), 'utf8');
    expect(openApiFileText(served)).toBe(committed);
  });
});

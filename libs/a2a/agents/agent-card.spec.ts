import { EventMeshError } from '@libs/errors';
import { meshCardOf, validateAgentCard } from './agent-card';

const card = () => ({
  name: 'echo',
  description: 'echoes',
  version: '1.0.0',
  supportedInterfaces: [{ url: 'https://agent.example/rpc', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
  capabilities: { streaming: true },
  defaultInputModes: ['text/plain'],
  defaultOutputModes: ['text/plain'],
  skills: [{ id: 'echo', name: 'Echo', description: 'echoes text', tags: ['text'] }],
  provider: { organization: 'Example', url: 'https://example.com' },
  signatures: [{ protected: 'x', signature: 'y' }],
});

const refusal = (body: unknown): { code: string; field: unknown } => {
  try {
    validateAgentCard(body);
  } catch (e) {
    const error = e as EventMeshError;
    return { code: error.code, field: error.details.field };
  }
  throw new Error('accepted');
};

describe('agent cards', () => {
  it('accepts a card with what the specification requires, keeping other fields', () => {
    expect(validateAgentCard(card())).toMatchObject({ name: 'echo', provider: { organization: 'Example' } });
  });

  it.each([
    ['no name', { ...card(), name: '' }, 'name'],
    ['no interfaces', { ...card(), supportedInterfaces: [] }, 'supportedInterfaces'],
    [
      'an interface without a URL',
      { ...card(), supportedInterfaces: [{ protocolBinding: 'JSONRPC', protocolVersion: '1.0' }] },
      'supportedInterfaces.0.url',
    ],
    [
      'only gRPC',
      { ...card(), supportedInterfaces: [{ url: 'https://a/', protocolBinding: 'GRPC', protocolVersion: '1.0' }] },
      'supportedInterfaces',
    ],
    ['a skill without tags', { ...card(), skills: [{ id: 's', name: 'S', description: 'd' }] }, 'skills.0.tags'],
    ['no capabilities', { ...card(), capabilities: undefined }, 'capabilities'],
    ['not an object', [], 'card'],
  ])('refuses %s with INVALID_AGENT_CARD naming the field', (_, body, field) => {
    expect(refusal(body)).toEqual({ code: 'INVALID_AGENT_CARD', field });
  });

  it("serves the card at the mesh's endpoints, v1.0 and v0.3, without the agent's URL or signatures, advertising streaming and push notifications (the mesh keeps push configs for every agent)", () => {
    const served = meshCardOf(
      validateAgentCard(card()),
      { rpcUrl: 'http://mesh/a2a/agents/echo/rpc', restUrl: 'http://mesh/a2a/agents/echo/rest' },
      { tokens: false },
    );
    expect(served.supportedInterfaces).toEqual([
      { url: 'http://mesh/a2a/agents/echo/rpc', protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url: 'http://mesh/a2a/agents/echo/rest', protocolBinding: 'HTTP+JSON', protocolVersion: '1.0' },
      { url: 'http://mesh/a2a/agents/echo/rpc', protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      { url: 'http://mesh/a2a/agents/echo/rest', protocolBinding: 'HTTP+JSON', protocolVersion: '0.3' },
    ]);
    expect(JSON.stringify(served)).not.toContain('agent.example');
    expect(served.signatures).toBeUndefined();
    expect(served.capabilities).toMatchObject({ streaming: true, pushNotifications: true });
    expect(served.securitySchemes).toBeUndefined();
  });

  it('serves the lists the specification requires even when the registered card has them empty (the codec drops empty lists)', () => {
    const served = meshCardOf(
      validateAgentCard({ ...card(), skills: [], defaultInputModes: [], defaultOutputModes: [] }),
      { rpcUrl: 'http://mesh/rpc', restUrl: 'http://mesh/rest' },
      { tokens: false },
    );
    expect([served.skills, served.defaultInputModes, served.defaultOutputModes]).toEqual([[], [], []]);
  });

  it('names the security schemes the gate enforces when it authenticates', () => {
    const served = meshCardOf(
      validateAgentCard(card()),
      { rpcUrl: 'http://mesh/rpc', restUrl: 'http://mesh/rest' },
      { tokens: true },
    );
    expect(Object.keys(served.securitySchemes as object)).toEqual(['bearer', 'apiKey']);
    expect(served.securityRequirements).toHaveLength(2);
  });
});

// Hostile stream parts through the AI SDK (a provider model of the test's own, the language model
// protocol's V4 parts): the same stream read with the plain `@ai-sdk/otel` integration and with
// `withDeltas` over it. Prints, for each, what the app read (or the error it got), and the delta
// events on the model-call spans (an in-memory exporter), and the package's deltaStats().
import { OpenTelemetry } from '@ai-sdk/otel';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { streamText } from 'ai';
import { deltaStats, withDeltas } from 'otel-session';

const exporter = new InMemorySpanExporter();
new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }).register();

const throwing = { type: 'text-delta', id: 't' };
Object.defineProperty(throwing, 'delta', { enumerable: true, get() { throw new Error('a hostile getter'); } });

const CASES = {
  odd: [
    { type: 'stream-start', warnings: [] },
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: 'Hel' },
    { type: 'text-delta', id: 't', delta: '' },
    { type: 'text-delta', id: 't', delta: 42 },
    { type: 'text-delta', id: 't', delta: 'lo' },
    { type: 'reasoning-start', id: 'r' },
    { type: 'reasoning-delta', id: 'r', delta: 'hmm' },
    { type: 'reasoning-end', id: 'r' },
    { type: 'text-end', id: 't' },
    { type: 'tool-call', toolCallId: 'c1', toolName: 'lookup', input: '{"q":"x"}' },
    { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: { inputTokens: { total: 1 }, outputTokens: { total: 2 } } },
  ],
  unknown: [
    { type: 'stream-start', warnings: [] },
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: 'Hi' },
    { type: 'a-part-from-the-future', id: 'x', delta: 'ignored' },
  ],
  throwing: [
    { type: 'stream-start', warnings: [] },
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: 'Hi' },
    throwing,
    { type: 'text-end', id: 't' },
    { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage: { inputTokens: { total: 1 }, outputTokens: { total: 2 } } },
  ],
};

function model(parts) {
  return {
    specificationVersion: 'v4',
    provider: 'hostile',
    modelId: 'hostile-1',
    supportedUrls: {},
    doGenerate: async () => { throw new Error('not used'); },
    doStream: async () => ({
      stream: new ReadableStream({ start(controller) { for (const part of parts) controller.enqueue(part); controller.close(); } }),
    }),
  };
}

async function read(parts, integration) {
  const seen = [];
  try {
    const result = streamText({ model: model(parts), prompt: 'hi', telemetry: { integrations: [integration] } });
    for await (const part of result.fullStream) {
      if (part.type === 'text-delta' || part.type === 'reasoning-delta') seen.push([part.type, String(part.text)]);
      else if (part.type === 'error') seen.push(['error', String(part.error?.message ?? part.error)]);
      else seen.push([part.type]);
    }
  } catch (error) {
    seen.push(['thrown', String(error?.message ?? error)]);
  }
  return seen;
}

const out = {};
for (const [name, parts] of Object.entries(CASES)) {
  exporter.reset();
  const plain = await read(parts, new OpenTelemetry());
  const tapped = await read(parts, withDeltas(new OpenTelemetry()));
  const events = exporter.getFinishedSpans().filter((span) => span.name.startsWith('chat '))
    .flatMap((span) => span.events.filter((e) => e.name === 'otel_session.delta').map((e) => e.attributes));
  out[name] = { plain, tapped, events };
}
console.log(JSON.stringify({ cases: out, stats: deltaStats() }));

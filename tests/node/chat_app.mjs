// A Node.js chat app of tests/node: one conversation (a root span, a turn per prompt) streamed
// from an OpenAI-compatible server, its spans exported over OTLP/HTTP to `otel-session collect`.
//
//   node chat_app.mjs '{"client": "ai-sdk" | "ai-sdk-plain" | "openai", "protocol": "proto" | "json",
//                       "traces": URL, "llm": URL, "session": ID, "prompts": [TEXT, ...], "tool": BOOL,
//                       "stopAfter": N}'
//
// "ai-sdk" registers `withDeltas(new OpenTelemetry())`, "ai-sdk-plain" the integration alone
// (what such an app records without this package), "openai" streams with openai-node through
// `tracedChatStream`. With "tool", the AI SDK offers a `lookup` tool and runs up to 3 steps.
// With "stopAfter", the app stops each reply after that many pieces: openai-node's by leaving the
// loop, the AI SDK's by aborting it (left without an abort, its spans never end).
// Prints one JSON line: each reply's streamed pieces as the app read them,
// the trace id and its run id (`runIdOf`), and the package's deltaStats().
import { OpenTelemetry } from '@ai-sdk/otel';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { trace } from '@opentelemetry/api';
import { OTLPTraceExporter as HttpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as HttpProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { isStepCount, jsonSchema, registerTelemetry, streamText, tool } from 'ai';
import OpenAI from 'openai';
import { SessionSpanProcessor, deltaStats, runIdOf, tracedChatStream, withDeltas, withSession } from 'otel-session';

const options = JSON.parse(process.argv[2]);
const Exporter = options.protocol === 'json' ? HttpJsonExporter : HttpProtoExporter;
const provider = new NodeTracerProvider({
  spanProcessors: [new SessionSpanProcessor(), new BatchSpanProcessor(new Exporter({ url: options.traces }))],
});
provider.register();

const integration = new OpenTelemetry();
registerTelemetry(options.client === 'ai-sdk' ? withDeltas(integration) : integration);
const compatible = createOpenAICompatible({ name: 'mock', baseURL: options.llm, apiKey: 'unused' });
const openai = new OpenAI({ baseURL: options.llm, apiKey: 'unused' });

/** One turn: the reply's pieces, as the app streamed them. */
async function reply(messages) {
  const pieces = [];
  if (options.client === 'openai') {
    for await (const chunk of await tracedChatStream(openai, { model: 'mock-gpt', messages })) {
      const piece = chunk.choices[0]?.delta?.content;
      if (piece) pieces.push(piece);
      if (pieces.length === options.stopAfter) break;
    }
  } else {
    const tools = options.tool ? {
      lookup: tool({
        description: 'Look a day up',
        inputSchema: jsonSchema({ type: 'object', properties: { query: { type: 'string' } } }),
        execute: async ({ query }) => `open on ${query}`,
      }),
    } : undefined;
    const abort = new AbortController(); // the AI SDK's way to stop a reply (its spans end on abort)
    const result = streamText({ model: compatible('mock-gpt'), messages, tools, stopWhen: isStepCount(3),
                                abortSignal: abort.signal });
    try {
      for await (const piece of result.textStream) {
        pieces.push(piece);
        if (pieces.length === options.stopAfter) abort.abort();
      }
    } catch (error) {
      if (!abort.signal.aborted) throw error;
    }
  }
  return pieces;
}

const turns = [];
let traceId;
await withSession(options.session, () => trace.getTracer('chat-app').startActiveSpan('conversation', async (root) => {
  traceId = root.spanContext().traceId;
  const messages = [];
  for (const prompt of options.prompts) {
    messages.push({ role: 'user', content: prompt });
    const pieces = await reply(messages);
    messages.push({ role: 'assistant', content: pieces.join('') });
    turns.push(pieces);
  }
  root.end();
}));
await provider.shutdown();
console.log(JSON.stringify({ traceId, runId: runIdOf(traceId), turns, stats: deltaStats() }));

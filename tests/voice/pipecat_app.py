"""A Pipecat voice bot run offline for the tests: the real pipeline, LLM service and tracing.

Pipecat's own ``OpenAILLMService`` talks to the loopback mock (``otel_session.demo.mock_llm``:
streaming, one tool call). No cloud STT/TTS can run here, so only those are replaced: the user's
speech enters as the frames Pipecat's own tests push (VAD start/stop, a final
``TranscriptionFrame``), and ``SilentTTS`` is a ``TTSService`` whose ``run_tts`` (wrapped in
Pipecat's ``@traced_tts``) yields silence; ``NullOutput`` is Pipecat's ``BaseOutputTransport``
writing that audio nowhere, in real time, so it emits the bot-speaking frames turns and latency
are measured from. Tracing is Pipecat's: ``PipelineWorker(enable_tracing=True, conversation_id=…)``.

The caller speaks again on the bot's cue, not on a clock (a loaded machine may take seconds to
answer): ``after-reply`` once the bot has stopped speaking its reply (Pipecat's turn tracking ends
that turn uninterrupted), ``mid-reply`` once it has started, its audio then lasting ``speech_s``
(paced by ``NullOutput``), so the caller cuts it off (the turn is interrupted).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import (
    BotStartedSpeakingFrame,
    BotStoppedSpeakingFrame,
    EndFrame,
    TranscriptionFrame,
    UserStartedSpeakingFrame,
    UserStoppedSpeakingFrame,
    VADUserStartedSpeakingFrame,
    VADUserStoppedSpeakingFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair, LLMUserAggregatorParams
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.services.tts_service import TTSService, TTSSettings
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from pipecat.turns.user_stop.speech_timeout_user_turn_stop_strategy import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.utils.tracing.service_decorators import traced_tts
from pipecat.workers.runner import WorkerRunner

SAMPLE_RATE = 16_000
_CHUNK = b"\0" * 6400  # 0.2 s of 16-bit mono silence


CUES = ("after-reply", "mid-reply")


@dataclass(frozen=True)
class Utterance:
    text: str
    then: str  # when the caller speaks again (or the call ends): one of CUES


class SilentTTS(TTSService):
    """A TTS service with no voice: ``seconds`` of silence per sentence (STT/TTS cannot run offline)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(
            sample_rate=SAMPLE_RATE, settings=TTSSettings(model=None, voice=None, language=None),
            push_start_frame=True, push_stop_frames=True, stop_frame_timeout_s=0.2,  # as Piper's HTTP TTS does
        )
        self._chunks = max(1, round(seconds / 0.2))

    def can_generate_metrics(self) -> bool:
        return True

    @traced_tts
    async def run_tts(self, text: str, context_id: str):
        await self.start_tts_usage_metrics(text)

        async def audio():
            for _ in range(self._chunks):
                yield _CHUNK

        async for frame in self._stream_audio_frames_from_iterator(audio(), in_sample_rate=SAMPLE_RATE, context_id=context_id):
            await self.stop_ttfb_metrics()
            yield frame


class NullOutput(BaseOutputTransport):
    """Pipecat's output transport with no device: audio frames are paced and written nowhere."""

    async def start(self, frame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame) -> bool:
        await asyncio.sleep(len(frame.audio) / (2 * frame.sample_rate * frame.num_channels))  # a device plays it
        return True


async def _converse(base_url: str, conversation_id: str, utterances: Sequence[Utterance], speech_s: float) -> None:
    llm = OpenAILLMService(
        api_key="unused", base_url=base_url,
        settings=OpenAILLMService.Settings(model="mock-gpt", system_instruction="You are a weather bot."),
    )

    async def get_weather(params) -> None:
        await params.result_callback({"forecast": "sunny"})

    llm.register_function("get_weather", get_weather)
    tools = ToolsSchema(standard_tools=[FunctionSchema(
        name="get_weather", description="The forecast", properties={"query": {"type": "string"}}, required=["query"],
    )])
    aggregators = LLMContextAggregatorPair(
        LLMContext([], tools),
        user_params=LLMUserAggregatorParams(
            user_turn_strategies=UserTurnStrategies(stop=[SpeechTimeoutUserTurnStopStrategy(user_speech_timeout=0.1)])
        ),
    )
    output = NullOutput(TransportParams(audio_out_enabled=True, audio_out_sample_rate=SAMPLE_RATE))
    pipeline = Pipeline([aggregators.user(), llm, SilentTTS(speech_s), output, aggregators.assistant()])
    worker = PipelineWorker(
        pipeline, params=PipelineParams(enable_metrics=True, audio_out_sample_rate=SAMPLE_RATE),
        enable_tracing=True, conversation_id=conversation_id, cancel_on_idle_timeout=False,
    )
    started = asyncio.Event()
    bot = {BotStartedSpeakingFrame: asyncio.Event(), BotStoppedSpeakingFrame: asyncio.Event()}

    @worker.event_handler("on_pipeline_started")
    async def _started(worker, frame) -> None:
        started.set()

    worker.set_reached_downstream_filter(tuple(bot))

    @worker.event_handler("on_frame_reached_downstream")
    async def _bot_speech(worker, frame) -> None:
        if isinstance(frame, BotStartedSpeakingFrame):
            bot[BotStoppedSpeakingFrame].clear()  # an earlier reply's stop (one cut off) is not this one's
        bot[type(frame)].set()

    async def bot_has(frame_type: type) -> None:
        await asyncio.wait_for(bot[frame_type].wait(), 60)  # generous: only a hung pipeline takes this long

    async def speak() -> None:
        await asyncio.wait_for(started.wait(), 60)
        for utterance in utterances:
            for event in bot.values():
                event.clear()
            await worker.queue_frames([
                VADUserStartedSpeakingFrame(), UserStartedSpeakingFrame(),
                TranscriptionFrame(utterance.text, "caller", "", finalized=True),
                VADUserStoppedSpeakingFrame(), UserStoppedSpeakingFrame(),
            ])
            await bot_has(BotStartedSpeakingFrame)  # the reply (after its tool call) is being spoken
            if utterance.then == "after-reply":
                await bot_has(BotStoppedSpeakingFrame)
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner()
    await runner.add_workers(worker)
    await asyncio.gather(runner.run(), speak())


def converse(base_url: str, conversation_id: str, utterances: Sequence[Utterance], *, speech_s: float = 0.6) -> None:
    """Run one conversation to its end (spans go to the global tracer provider, as Pipecat's do)."""
    asyncio.run(_converse(base_url, conversation_id, utterances, speech_s))


def _export_in_turn_pairs(provider, endpoint: str, run) -> None:
    """Run, then send the spans (in the order they ended) with the official OTLP exporter, one request
    from each turn's span through the next turn's: a batch boundary a batch processor may draw, where
    the exporter's grouping by scope puts the later turn's span before the services inside it."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    run()
    spans = list(memory.get_finished_spans())
    turns = [position for position, span in enumerate(spans) if span.name == "turn"]
    cuts = [0, *turns[0::2], len(spans)]  # requests: [.. T0), [T0 .. T1], (T1 .. T2), [T2 .. T3] …
    cuts = sorted({*cuts, *(position + 1 for position in turns[1::2])})
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True)
    for start, end in zip(cuts, cuts[1:]):
        if spans[start:end]:
            exporter.export(spans[start:end])
    exporter.shutdown()


def main() -> None:
    """``python pipecat_app.py BASE_URL CONVERSATION_ID (--otlp ENDPOINT | --in-process DIR) TEXT:CUE...``

    A process of its own per conversation: Pipecat traces through the global tracer provider,
    which a process sets once.
    """
    import argparse

    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("conversation_id")
    parser.add_argument("--otlp")
    parser.add_argument("--otlp-turn-pairs", action="store_true",
                        help="export with --otlp in requests that each run from a turn's span through the next one's")
    parser.add_argument("--in-process")
    parser.add_argument("--no-code", action="store_true",
                        help="with --in-process: only configure() on Pipecat's provider, no session or run opened")
    parser.add_argument("--speech-s", type=float, default=0.6)
    parser.add_argument("utterances", nargs="+")
    args = parser.parse_args()
    utterances = [Utterance(text, cue) for text, cue in (item.rsplit(":", 1) for item in args.utterances)]
    if unknown := {utterance.then for utterance in utterances} - set(CUES):
        parser.error(f"unknown cues {sorted(unknown)}: use one of {CUES}")
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-bot"}))
    trace.set_tracer_provider(provider)
    if args.otlp and args.otlp_turn_pairs:
        _export_in_turn_pairs(provider, args.otlp, lambda: converse(args.base_url, args.conversation_id, utterances,
                                                                     speech_s=args.speech_s))
    elif args.otlp:  # Pipecat's documented setup: the official OTLP exporter in a batch processor
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=args.otlp, insecure=True)))
        converse(args.base_url, args.conversation_id, utterances, speech_s=args.speech_s)
        provider.shutdown()
    else:  # recording in process: otel_session.configure() on the app's provider, the call in a session
        import otel_session

        recorder = otel_session.configure(args.in_process, tracer_provider=provider)
        if args.no_code:  # Pipecat's own spans name the conversation: recorded as the collector would
            converse(args.base_url, args.conversation_id, utterances, speech_s=args.speech_s)
        else:
            with otel_session.session(args.conversation_id), otel_session.run("weather-bot"):
                converse(args.base_url, args.conversation_id, utterances, speech_s=args.speech_s)
        recorder.shutdown()


if __name__ == "__main__":
    main()

"""The redactor's cost: per streamed delta, per collector span, per forwarded span.

    python -m bench.redact

Process time, best of 7 rounds (the VM's noise is one-sided: a round is only ever slowed down):

* ``redact.delta``: ``DeltaStream.feed`` per delta, on a booking answer with an address, a phone
  and a card streamed in 2–6 character chunks; baseline: ``Redactor.text`` on each chunk alone
  (what redacting deltas one by one, without a stream, would cost);
* ``redact.span``: ``Redactor.redact_events`` per span on ``bench.collector``'s agent-loop spans;
  baseline: ``normalize_span`` on the same spans;
* ``redact.forward``: ``redact_otlp`` (the forwarder's redaction step) per span of the same export
  requests; baseline: parsing and serializing them (what forwarding costs without it).

Writes ``bench/results-redact.json``.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable

from bench import Figure, write_results

ROUNDS = 7
ANSWER = (
    "Sure! I booked a table for two on Friday at 19:00. The confirmation goes to jane.doe@example.com, "
    "and we will call +33 1 23 45 67 89 if anything changes. The deposit of 20 EUR was taken from the "
    "card 4111 1111 1111 1111; ref B12T3. Anything else I can do for you today? "
) * 4


def _best(function: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.process_time()
        function()
        best = min(best, time.process_time() - start)
    return best


def _chunks(text: str) -> list[str]:
    rng = random.Random(7)
    chunks, position = [], 0
    while position < len(text):
        size = rng.randint(2, 6)
        chunks.append(text[position : position + size])
        position += size
    return chunks


def _requests(count: int = 12, per_request: int = 64) -> list[bytes]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    from bench.collector import _batch

    resource = Resource.create({"service.name": "bench-agent"})
    scope = InstrumentationScope("bench")
    return [encode_spans(_batch(n % 4, n, per_request, per_request, resource, scope)).SerializeToString()
            for n in range(count)]


def main(argv: list[str] | None = None) -> dict:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from otel_session.collector.otlp import parse_protobuf, spans_of
    from otel_session.normalize import normalize_span
    from otel_session.redact import RedactionPolicy, Redactor
    from otel_session.redact.otlp import redact_otlp

    redactor = Redactor(RedactionPolicy(), key=b"bench")
    chunks = _chunks(ANSWER)

    def stream() -> None:
        for _ in range(20):
            delta_stream = redactor.delta_stream()
            for number, chunk in enumerate(chunks):
                delta_stream.feed(chunk, number)
            delta_stream.flush()

    def one_by_one() -> None:
        for _ in range(20):
            for chunk in chunks:
                redactor.text(chunk)

    deltas = 20 * len(chunks)
    delta_us, alone_us = _best(stream) / deltas * 1e6, _best(one_by_one) / deltas * 1e6

    bodies = _requests()
    spans = [list(spans_of(parse_protobuf(body))) for body in bodies]
    span_count = sum(len(batch) for batch in spans)
    normalized = [[event for span in batch for event in normalize_span(span)] for batch in spans]

    def normalize() -> None:
        for batch in spans:
            for span in batch:
                normalize_span(span)

    def redact() -> None:
        for events in normalized:
            redactor.redact_events([copy.copy(event) for event in events])

    def copies() -> None:
        for events in normalized:
            [copy.copy(event) for event in events]

    span_us = (_best(redact) - _best(copies)) / span_count * 1e6
    normalize_us = _best(normalize) / span_count * 1e6

    def forward() -> None:
        for body in bodies:
            request = ExportTraceServiceRequest.FromString(body)
            redact_otlp(request, redactor)
            request.SerializeToString()

    def forward_raw() -> None:
        for body in bodies:
            ExportTraceServiceRequest.FromString(body).SerializeToString()

    raw_us = _best(forward_raw) / span_count * 1e6
    forward_us = _best(forward) / span_count * 1e6 - raw_us

    figures = [
        Figure("redact.delta", delta_us, "us/delta", baseline=alone_us,
               note=f"DeltaStream.feed, {len(chunks)} chunks of 2-6 characters; baseline Redactor.text per chunk alone"),
        Figure("redact.span", span_us, "us/span", baseline=normalize_us,
               note=f"Redactor.redact_events on {span_count} agent-loop spans; baseline normalize_span"),
        Figure("redact.forward", forward_us, "us/span", baseline=raw_us,
               note="redact_otlp on the same requests; baseline protobuf parse + serialize"),
    ]
    return write_results("redact", figures, {"rounds": ROUNDS, "deltas": deltas, "spans": span_count})


if __name__ == "__main__":
    main()

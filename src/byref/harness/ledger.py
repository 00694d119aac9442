"""What a run cost the model: characters read and written, the peak request, token counts.

`model_read_chars` counts every piece of content that entered the model's context (user text and
tool results as rendered), each once however many later requests repeat it;
`model_written_chars` counts what the model produced (text and call arguments);
`peak_request_chars` is the largest single request, system text and declarations included.
"""

from __future__ import annotations

from dataclasses import dataclass

from byref.harness.loop import RunResult
from byref.harness.tokens import count_tokens
from byref.jsonview import dumps


@dataclass(frozen=True, slots=True)
class Ledger:
    """What a run cost the model: characters read and written, the peak request."""
    model_read_chars: int
    model_written_chars: int
    peak_request_chars: int
    model_read_tokens: int
    model_written_tokens: int
    peak_request_tokens: int
    requests: int

    @staticmethod
    def of(run: RunResult, *, tokens: bool = True) -> Ledger:
        """The ledger of a finished run (`tokens=False`: characters only, token fields 0, for
        a caller that takes token counts from elsewhere)."""
        read: list[str] = []
        written: list[str] = []
        for message in run.transcript:
            for part in message.parts:
                if message.role == "assistant":
                    written.append(str(part.value) if part.type == "text"
                                   else dumps(part.value["input"]))
                else:
                    read.append(part.rendered if part.rendered is not None else str(part.value))
        peak = max(run.requests, key=lambda r: r.chars())
        peak_text = peak.all_text() if tokens else ""
        return Ledger(
            model_read_chars=sum(map(len, read)),
            model_written_chars=sum(map(len, written)),
            peak_request_chars=peak.chars(),
            model_read_tokens=sum(count_tokens(t) for t in read) if tokens else 0,
            model_written_tokens=sum(count_tokens(t) for t in written) if tokens else 0,
            peak_request_tokens=count_tokens(peak_text) if tokens else 0,
            requests=len(run.requests),
        )

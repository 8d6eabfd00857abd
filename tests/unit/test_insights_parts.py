"""The insights step's parts (``sidecar/insights/parts.py``): any text, cut so that each part fits
the room, nothing lost or doubled, in order, with few token counts."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.insights.parts import Overflow, fitting, groups, parts, render
from sidecar.insights.prompt import line_of
from sidecar.insights.summarize import ANSWER_TOKENS, OVERHEAD_TOKENS
from sidecar.outcome import Verdict
from sidecar.storage.memory import InMemoryStorage
from tests.support.fakes import chat_answer
from tests.unit.test_insights import FakeChat, insights_pool, q, run_insights

Counter = Callable[[str], int]


def utf8_thirds(text: str) -> int:
    """A byte-pair tokenizer's rough cost: a token every 3 bytes of UTF-8."""
    return -(-len(text.encode("utf-8", "surrogatepass")) // 3)


def words_and_marks(text: str) -> int:
    """A word-level tokenizer: each word one token, each other mark one."""
    return len(re.findall(r"\w+|[^\w\s]", text))


def word_pieces(text: str) -> int:
    """A subword tokenizer: pieces of up to 4 letters, each other mark one."""
    return len(re.findall(r"\w{1,4}|[^\w\s]", text))


COUNTERS: dict[str, Counter] = {"utf8/3": utf8_thirds, "words": words_and_marks, "pieces": word_pieces}


class Counting:
    """A token counter as the chat has it (async, maybe a round trip), counting its calls."""

    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.calls = 0

    async def __call__(self, text: str) -> int:
        self.calls += 1
        return self.counter(text)


def cut(lines: list[str], room: int, counter: Counter) -> tuple[list[list[str]], int]:
    count = Counting(counter)

    async def main() -> list[list[str]]:
        return await parts(lines, room, count)

    return anyio.run(main), count.calls


def assert_whole(lines: list[str], got: list[list[str]]) -> None:
    """Joined in order, the parts' strings are the lines: each line the run of pieces that make it."""
    pieces = [p for part in got for p in part]
    at = 0
    for line in lines:
        built = None
        while built is None or len(built) < len(line):
            assert at < len(pieces), ("text lost", line)
            piece = pieces[at]
            at += 1
            assert piece or line == "", "an empty piece of a line"
            built = (built or "") + piece
            assert line.startswith(built), ("a piece crosses lines or the order changed", line, built)
    assert at == len(pieces), "text doubled"


# --- any text --------------------------------------------------------------------------------

# Characters that make cutting hard: combining marks, joiners and emoji sequences, flags, CJK,
# right-to-left, quotes and backslashes (longer in JSON), controls, every kind of space.
HARD = (
    "e\u0301a\u0308\u0327 \u200d\U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f44d\U0001f3fd \U0001f1fa\U0001f1e6"
    '\U0001f1f7\U0001f1fa 会議です。 مرحبا "quoted" back\\slash \t\r\n\x00\x1f\u2028\u00a0\u3000 …!?.'
)
TEXTS = st.one_of(
    st.text(max_size=400),
    st.text(alphabet=HARD, max_size=600),
    st.text(alphabet="abc", max_size=3000),  # one unpunctuated, unspaced block
    st.lists(
        st.sampled_from(["We", "agreed", "to", "ship", "Friday", ".", "!", " ", "  ", "\n", "Да", "。"]), max_size=600
    ).map("".join),
)
SHAPES = st.one_of(
    TEXTS.map(lambda t: [t]),  # one huge line
    st.lists(TEXTS, max_size=30),  # lines of any size
    st.lists(st.text(max_size=4), max_size=300),  # many tiny lines
)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=SHAPES, room=st.integers(12, 300), name=st.sampled_from(sorted(COUNTERS)))
def test_any_text_is_cut_into_parts_within_the_room_nothing_lost_nothing_twice(
    lines: list[str], room: int, name: str
) -> None:
    counter = COUNTERS[name]
    got, calls = cut(lines, room, counter)
    for part in got:
        assert part, "an empty part"
        assert counter(render(part)) <= room, (name, room, part)
    assert_whole(lines, got)
    assert (got == []) == (lines == [])
    assert calls <= 64 * max(len(got), 1)  # never a count for each prefix


def test_a_block_over_twice_the_room_is_cut_into_parts_each_within_it() -> None:
    """The case halving once did not fit: one unpunctuated block, no segments, 10 times the room."""
    block = "word" * 2500 + "".join(f"x{i}" for i in range(2000))
    got, _ = cut([line_of(0, block)], 300, utf8_thirds)
    assert len(got) > 10
    assert all(utf8_thirds(render(p)) <= 300 for p in got)
    assert_whole([line_of(0, block)], got)


# --- where the cuts fall -----------------------------------------------------------------------


def test_a_long_line_is_cut_at_sentence_ends_where_it_has_them() -> None:
    sentences = " ".join(f"Sentence number {i} says that the plan for part {i} stays as it was." for i in range(200))
    got, _ = cut([sentences], 200, utf8_thirds)
    pieces = [p for part in got for p in part]
    assert len(pieces) > 5
    assert all(re.search(r"\.\s*$", p) for p in pieces), [p[-20:] for p in pieces]


def test_without_sentence_ends_a_line_is_cut_at_spaces() -> None:
    words = " ".join(f"word{i}" for i in range(3000))
    got, _ = cut([words], 150, utf8_thirds)
    pieces = [p for part in got for p in part]
    assert len(pieces) > 5
    assert all(p.endswith(" ") for p in pieces[:-1])


@pytest.mark.parametrize(
    "unit",
    [
        "e\u0301",  # a letter and its combining accent
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # a family: three emoji joined
        "\U0001f44d\U0001f3fd",  # a thumb with a skin tone
        "\U0001f1fa\U0001f1e6",  # a flag: two regional indicators
        "\u2764\ufe0f",  # a heart with its variation selector
        "\r\n",
    ],
)
def test_no_cut_splits_a_character_as_a_reader_sees_it(unit: str) -> None:
    got, _ = cut([unit * 400], 40, utf8_thirds)
    pieces = [p for part in got for p in part]
    assert len(pieces) > 5
    assert all(len(p) % len(unit) == 0 and p == unit * (len(p) // len(unit)) for p in pieces), pieces[:3]


def test_a_character_longer_than_the_room_is_split_and_nothing_fitting_is_an_overflow() -> None:
    marks = "a" + "\u0301" * 300  # one character as a reader sees it, 600 bytes
    got, _ = cut([marks], 30, utf8_thirds)
    assert all(utf8_thirds(render(p)) <= 30 for p in got)
    assert_whole([marks], got)
    with pytest.raises(Overflow):
        cut(["abc"], 1, utf8_thirds)  # '["a"]' alone counts 2


# --- counting ---------------------------------------------------------------------------------


def six_hours() -> list[str]:
    """Six hours of a meeting: an utterance of about 25 words every 10 seconds."""
    return [
        line_of(
            i * 10, f"Item {i}: we went through point {i} of the plan and agreed to keep the schedule for part {i}."
        )
        for i in range(6 * 360)
    ]


@pytest.mark.parametrize("name", sorted(COUNTERS))
def test_a_six_hour_transcript_costs_a_few_counts_a_part(name: str, figures: dict[str, str]) -> None:
    lines = six_hours()
    room = 8192 - ANSWER_TOKENS - OVERHEAD_TOKENS
    got, calls = cut(lines, room, COUNTERS[name])
    assert all(COUNTERS[name](render(p)) <= room for p in got)
    assert_whole(lines, got)
    # Each part is well filled (not cut short for fear of the estimate) ...
    assert all(COUNTERS[name](render(p)) >= room * 0.7 for p in got[:-1])
    # ... for a few counts each: counting each line would be 2,160.
    assert calls <= 3 * len(got)
    figures[f"insights parts ({name})"] = f"six hours at an 8k context: {len(got)} parts, {calls} token counts"


def test_notes_and_the_dictionary_are_grouped_with_few_counts() -> None:
    notes = [{"time": "00:00:10", "sentence": f"Point {i} was agreed.", "quote": f"point {i}"} for i in range(500)]
    count = Counting(utf8_thirds)

    async def main() -> tuple[list[tuple[list[dict[str, str]], int]], tuple[list[str], int]]:
        return await groups(notes, 400, count), await fitting([f"topic {i}" for i in range(300)], 100, count)

    grouped, (kept, used) = anyio.run(main)
    assert [n for g, _ in grouped for n in g] == notes
    assert all(utf8_thirds(json.dumps(g, ensure_ascii=False)) == t <= 400 for g, t in grouped)
    assert kept == [f"topic {i}" for i in range(len(kept))] and 0 < len(kept) < 300
    assert utf8_thirds(json.dumps(kept, ensure_ascii=False)) == used <= 100
    assert count.calls <= 3 * (len(grouped) + 1)


# --- the step ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_transcript_of_one_unpunctuated_block_is_summarized_within_the_context(
    storage: InMemoryStorage,
) -> None:
    """No segments, no sentence ends: the text is one line, three times the context."""
    words = " ".join(f"word{i}" for i in range(12000))
    rid = storage.add_record("ann")
    row = storage.row(rid)
    row.state, row.available_at, row.progress = "done", 0, 1.0
    storage.put_transcript(rid, words, [], language="en")
    storage.owner_queue_insights(rid)
    context = 8192

    def answer(body: dict[str, Any]) -> httpx.Response:
        doc = json.loads(body["messages"][-1]["content"])
        if "notes" in doc:  # the combining request picks notes by number
            return chat_answer({"keep": [1], "topics": []})
        quote = " ".join(doc["transcript"][0].split()[1:9])
        return chat_answer({"brief": [q("The words were read.", quote)], "topics": []})

    chat = FakeChat(answer)
    async with insights_pool(storage, chat, context_tokens=context) as (pool, _):
        assert await run_insights(pool, storage) is Verdict.ADVANCED
    transcript_requests = [r for r in chat.requests if "transcript" in json.loads(r["messages"][-1]["content"])]
    assert len(transcript_requests) >= 3
    sent = "".join(s for r in transcript_requests for s in json.loads(r["messages"][-1]["content"])["transcript"])
    assert sent == words  # compacted: no times
    for r in chat.requests:
        assert len(json.dumps(r["messages"], ensure_ascii=False)) / 2.5 + ANSWER_TOKENS <= context

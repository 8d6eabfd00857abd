"""What the summarizer sends and how it combines the answers (``sidecar.insights.summarize``), against a
scripted chat: the compacted transcript, instructions shared by every request of a transcript, parts at
once as far as the server answers at once, and the brief of a long meeting picked from the parts' notes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from sidecar.insights.chat import ContextExceeded
from sidecar.insights.summarize import LEAST_PART_TOKENS, Source, summarize

pytestmark = pytest.mark.anyio

Messages = list[dict[str, str]]


class Scripted:
    """A chat server whose answers a function gives; it keeps every request, and answers ``parallel`` at once."""

    name = "scripted"
    who = "the scripted server"
    model = "scripted"

    def __init__(self, answer: Callable[[Messages, dict[str, Any]], Any], *, context: int = 8192, parallel: int = 1):
        self.answer = answer
        self.context_tokens = context
        self.parallel = parallel
        self.requests: list[tuple[Messages, dict[str, Any]]] = []
        self.at_once = 0
        self.most_at_once = 0

    async def complete(self, messages: Messages, schema: dict[str, Any], max_tokens: int) -> str:
        self.requests.append((messages, schema))
        self.at_once += 1
        self.most_at_once = max(self.most_at_once, self.at_once)
        try:
            await anyio.sleep(0.01)
            out = self.answer(messages, schema)
            if isinstance(out, BaseException):
                raise out
            return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)
        finally:
            self.at_once -= 1

    async def count_tokens(self, text: str) -> int:
        return len(text) // 3 + 1


def doc(messages: Messages) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(messages[-1]["content"])
    return parsed


def meeting(items: int) -> tuple[Source, list[str]]:
    """A meeting of ``items`` points, two speakers taking turns, with fillers and a stutter in each."""
    said = [f"Point {i}: we, um, we agreed that team {i} ships the the item {i} on day {i}." for i in range(items)]
    segs = [
        {"start": i * 10.0, "end": i * 10.0 + 9, "speaker": f"Speaker {i % 2 + 1}", "text": t}
        for i, t in enumerate(said)
    ]
    return Source(" ".join(said), segs, "en", ["Shipping", "Hiring"]), said


def note_for(lines: list[str]) -> dict[str, Any]:
    """A part's answer: one sentence, quoting the first line of the part as the model saw it."""
    first = lines[0].split(": ", 1)[1]  # without the speaker's label
    number = first.split(":")[0].split()[-1]
    return {"brief": [{"sentence": f"Team {number} ships item {number}.", "quote": first[:60]}]}


async def test_the_model_reads_no_times_no_fillers_and_short_speaker_labels() -> None:
    source, _ = meeting(3)
    chat = Scripted(lambda m, s: {"brief": [], "topics": []})
    await summarize(chat, source)
    transcript = doc(chat.requests[0][0])["transcript"]
    # Numbered: a transcript this short is a voice note's, whose points the model names by line.
    assert transcript == [
        "1. S1: Point 0: we agreed that team 0 ships the item 0 on day 0.",
        "2. S2: Point 1: we agreed that team 1 ships the item 1 on day 1.",
        "3. S1: Point 2: we agreed that team 2 ships the item 2 on day 2.",
    ]


async def test_a_quote_from_the_compacted_text_keeps_the_originals_words_and_time() -> None:
    source, said = meeting(3)
    quote = "S2: Point 1: we agreed that team 1 ships the item"
    chat = Scripted(lambda m, s: {"brief": [{"sentence": "Team 1 ships item 1.", "quote": quote}], "topics": []})
    found = await summarize(chat, source)
    assert [(q.quote, q.start, q.end) for q in found.brief] == [
        ("Point 1: we, um, we agreed that team 1 ships the the item", 10.0, 19.0)
    ]
    assert found.brief[0].quote in said[1]


async def test_every_request_of_a_long_meeting_starts_with_the_same_instructions_and_dictionary() -> None:
    source, _ = meeting(300)

    def answer(messages: Messages, schema: dict[str, Any]) -> Any:
        d = doc(messages)
        if "transcript" in d:
            return note_for(d["transcript"])
        return {"keep": [1, 3], "topics": [{"name": "Shipping", "quote": "team 4 ships the item"}]}

    chat = Scripted(answer, context=4096)
    found = await summarize(chat, source, answer_tokens=512)
    parts = [(m, s) for m, s in chat.requests if "transcript" in doc(m)]
    picks = [(m, s) for m, s in chat.requests if "notes" in doc(m)]
    assert len(parts) >= 3 and len(picks) == 1
    system = parts[0][0][0]["content"]
    assert all(m[0]["content"] == system for m, _ in parts)  # the server's prompt cache reads them once
    assert picks[0][0][0]["content"].startswith(system)
    dictionary = json.dumps({"dictionary": doc(parts[0][0])["dictionary"]}, ensure_ascii=False)[:-1]
    assert all(m[-1]["content"].startswith(dictionary + ",") for m, _ in chat.requests)
    assert sorted(doc(parts[0][0])["dictionary"]) == ["Hiring", "Shipping"]
    assert [doc(m)["part"] for m, _ in parts] == [f"{i} of {len(parts)}" for i in range(1, len(parts) + 1)]
    # A part's notes carry no topics; the pick chooses the notes by number, and the topics.
    assert all(set(s["properties"]) == {"brief"} for _, s in parts)
    assert set(picks[0][1]["properties"]) == {"keep", "topics"}
    notes = doc(picks[0][0])["notes"]
    assert notes[0].startswith("1: Team 0 ships item 0. | Point 0: we, um, we agreed")
    assert [q.sentence for q in found.brief] == ["Team 0 ships item 0.", notes[2].split(": ", 1)[1].split(" |")[0]]
    assert found.topics == ["Shipping"]


@pytest.mark.parametrize(
    ("items", "sentences", "parts"),
    [
        (300, 5, 5),  # the room makes 3 parts; an even share for each of 5 sentences makes them 5
        (300, 2, 3),  # as many parts as the room needs already give each sentence its stretch
        (160, 5, 0),  # five shares would be under LEAST_PART_TOKENS: fewer parts, of that size
    ],
)
async def test_a_meeting_read_in_parts_gives_each_sentence_of_the_brief_a_stretch(
    items: int, sentences: int, parts: int
) -> None:
    source, said = meeting(items)

    def answer(messages: Messages, schema: dict[str, Any]) -> Any:
        d = doc(messages)
        return note_for(d["transcript"]) if "transcript" in d else {"keep": [1, 2, 3, 4, 5], "topics": []}

    chat = Scripted(answer, context=4096)
    await summarize(chat, source, sentences=sentences, answer_tokens=512)
    asked = [(doc(m)["transcript"], s) for m, s in chat.requests if "transcript" in doc(m)]
    sizes = [await chat.count_tokens(json.dumps(part, ensure_ascii=False)) for part, _ in asked]
    if parts:
        assert len(asked) == parts
    else:
        assert 1 < len(asked) < sentences and min(sizes[:-1]) >= 0.8 * LEAST_PART_TOKENS
    # Each part asked for its share of the brief's sentences, no more.
    each = -(-sentences // len(asked))
    assert [s["properties"]["brief"]["maxItems"] for _, s in asked] == [each] * len(asked)
    # Every line once, in order, and the parts of even size (within a line or two of each other).
    lines = [line for part, _ in asked for line in part]
    assert [line.split("Point ")[1].split(":")[0] for line in lines] == [str(i) for i in range(len(said))]
    assert max(sizes[:-1]) - min(sizes[:-1]) <= 2 * max(map(len, lines)) // 3


async def test_a_pick_of_no_valid_note_keeps_the_first_notes() -> None:
    source, _ = meeting(300)

    def answer(messages: Messages, schema: dict[str, Any]) -> Any:
        d = doc(messages)
        return note_for(d["transcript"]) if "transcript" in d else {"keep": [0, 999], "topics": []}

    found = await summarize(Scripted(answer, context=4096), source, sentences=2, answer_tokens=512)
    assert [q.sentence for q in found.brief][:1] == ["Team 0 ships item 0."] and len(found.brief) == 2


async def test_parts_go_at_once_as_far_as_the_server_answers_at_once_and_keep_their_order() -> None:
    source, _ = meeting(300)
    for parallel in (1, 2):

        def answer(messages: Messages, schema: dict[str, Any]) -> Any:
            d = doc(messages)
            return note_for(d["transcript"]) if "transcript" in d else {"keep": [1, 2, 3, 4, 5], "topics": []}

        chat = Scripted(answer, context=4096, parallel=parallel)
        found = await summarize(chat, source, answer_tokens=512)
        assert chat.most_at_once == parallel
        numbers = [int(q.sentence.split()[1]) for q in found.brief]
        assert numbers == sorted(numbers) and numbers[0] == 0


async def test_a_part_too_long_for_the_server_makes_the_parts_smaller_while_others_run() -> None:
    source, _ = meeting(300)
    refused = 0

    def answer(messages: Messages, schema: dict[str, Any]) -> Any:
        nonlocal refused
        d = doc(messages)
        if "transcript" in d:
            if len(messages[-1]["content"]) > 4000:
                refused += 1
                return ContextExceeded("the request exceeds the available context size")
            return note_for(d["transcript"])
        return {"keep": [1], "topics": []}

    found = await summarize(Scripted(answer, context=4096, parallel=2), source, answer_tokens=512)
    assert refused >= 1 and found.brief and any("parts made smaller" in n for n in found.notes)


async def test_a_note_not_in_the_transcripts_language_is_not_offered() -> None:
    source, _ = meeting(300)
    # (half of its words its quote's, or the grounding would refuse it first: a note must say what its quote says)
    russian = "Team ships the item, как решили."

    def answer(messages: Messages, schema: dict[str, Any]) -> Any:
        d = doc(messages)
        if "transcript" in d:
            n = note_for(d["transcript"])
            if d["part"].startswith("2 "):
                n["brief"][0]["sentence"] = russian
            return n
        return {"keep": [1, 2, 3], "topics": []}

    chat = Scripted(answer, context=4096)
    found = await summarize(chat, source, answer_tokens=512)
    offered = next(doc(m)["notes"] for m, _ in chat.requests if "notes" in doc(m))
    assert not any(russian in n for n in offered) and russian not in found.text
    assert any("not in en" in n for n in found.notes)


async def test_a_long_enough_transcript_is_asked_for_several_sentences_a_short_one_for_one_at_least() -> None:
    # A voice note has no decisions: free to write none, a small model wrote none (its brief was empty).
    source, _ = meeting(150)
    chat = Scripted(lambda m, s: {"brief": [], "topics": []})
    await summarize(chat, source)
    schema = chat.requests[0][1]["properties"]
    assert schema["brief"].get("minItems") == 3 and schema["topics"].get("minItems") == 1
    # A short one (a voice note's request): the things it speaks of, the brief's first line, cannot be left out.
    source, _ = meeting(3)
    chat = Scripted(lambda m, s: {"things": [], "points": [], "topics": []})
    await summarize(chat, source)
    schema = chat.requests[0][1]
    assert "things" in schema["required"] and schema["properties"]["things"]["minItems"] == 1
    assert schema["properties"]["topics"]["minItems"] == 1


VOICE_NOTE = [
    "Маяк светил всю ночь над тёмным морем.",
    "Рыбаки вернулись в порт к обеду.",
    "Отчёт отправили директору в пятницу.",
    "Дети строили во дворе снежный замок.",
    "Встреча назначена у фонтана в семь часов.",
    "Мост закрыт на ремонт до весны.",
]


def voice_note() -> Source:
    segs = [{"start": i * 4.0, "end": i * 4.0 + 3.5, "text": t} for i, t in enumerate(VOICE_NOTE)]
    return Source(" ".join(VOICE_NOTE), segs, "ru", ["Работа", "Погода"])


async def test_a_voice_note_is_asked_what_it_speaks_of_and_which_lines_say_its_points() -> None:
    chat = Scripted(
        lambda m, s: {
            "topics": ["Работа", "Мост", "Отпуск"],
            "points": [6, 3, 3, 99],
            # Said, said again in other words' case, a dictionary name the note never says, a name it never says.
            "things": ["маяк", "Отчёт директору", "МАЯК", "Погода", "Пётр Ильич"],
        }
    )
    found = await summarize(chat, voice_note())
    (messages, schema), *more = chat.requests
    assert not more and messages[0]["content"].startswith("Brief a voice note, in Russian.")
    assert "decision" not in messages[0]["content"]
    # The lines numbered, the points named by number (at most the brief's room less the first line), the things
    # and new topics in Russian letters; the topics first, so that the things are the note's, not the dictionary's.
    assert doc(messages)["transcript"][2] == "3. Отчёт отправили директору в пятницу."
    props = schema["properties"]
    assert list(props) == ["topics", "points", "things"]
    assert props["points"]["maxItems"] == 4 and props["points"]["items"]["maximum"] == len(VOICE_NOTE)
    pattern = props["things"]["items"]["pattern"]
    assert re.match(pattern, "Маяк") and not re.match(pattern, "The lighthouse")
    assert re.match(pattern, "Ольга Петровна") and not re.match(pattern, "самолёт из Новосибирска задерживается")
    assert re.match(props["topics"]["items"]["pattern"], "Мост")
    # The things said, once each, as the first line, backed by the sentence nearest to them; then each point
    # once, as said, in the note's order; a number past the last line is no point.
    assert [(q.sentence, q.quote) for q in found.brief] == [
        ("Маяк, Отчёт директору.", "Отчёт отправили директору в пятницу"),
        ("Отчёт отправили директору в пятницу.", "Отчёт отправили директору в пятницу"),
        ("Мост закрыт на ремонт до весны.", "Мост закрыт на ремонт до весны"),
    ]
    # The owner's name as the model chose it; a new one the note says; a new one it never says is refused.
    assert found.topics == ["Мост", "Работа"] and found.missing == ""
    assert any("'Отпуск': not in the dictionary" in n for n in found.notes)


async def test_a_voice_note_whose_things_are_none_it_says_keeps_its_points() -> None:
    # The 1.5B model copied the dictionary's names as the things of a note that says none of them.
    chat = Scripted(lambda m, s: {"topics": ["Работа"], "points": [2], "things": ["Работа", "Погода"]})
    found = await summarize(chat, voice_note())
    assert [q.sentence for q in found.brief] == [VOICE_NOTE[1]]


async def test_a_voice_notes_about_in_another_language_is_dropped_and_its_points_stay() -> None:
    chat = Scripted(lambda m, s: {"about": "The note is about the city news.", "points": [1, 2], "topics": ["Погода"]})
    found = await summarize(chat, voice_note())
    assert [q.sentence for q in found.brief] == VOICE_NOTE[:2]
    assert any("'The note is about the city news.': not in ru" in n for n in found.notes)


async def test_an_english_notes_things_may_begin_with_any_letter() -> None:
    said = "The bridge is closed until spring."
    segs = [{"start": 0.0, "end": 3.0, "text": said}]
    chat = Scripted(lambda m, s: {"things": ["bridge", "spring"], "points": [], "topics": ["Transport"]})
    found = await summarize(chat, Source(said, segs, "en", ["Transport"]))
    pattern = chat.requests[0][1]["properties"]["things"]["items"]["pattern"]  # any letter; three words at most
    assert re.match(pattern, "the snow castle") and not re.match(pattern, "the castle of snow")
    assert [q.sentence for q in found.brief] == ["Bridge, spring."] and found.topics == ["Transport"]


async def test_an_answer_with_nothing_usable_is_asked_for_once_more_simply() -> None:
    simple = {
        "brief": [{"quote": "Мост закрыт на ремонт до весны", "sentence": "Запись о городских новостях."}],
        "topics": [{"name": "Мост", "quote": "Мост закрыт на ремонт"}],
    }
    chat = Scripted(lambda m, s: simple if m[0]["content"].startswith("Say in one sentence") else {"brief": []})
    found = await summarize(chat, voice_note())
    assert len(chat.requests) == 2 and found.requests == 2
    messages, schema = chat.requests[1]
    assert messages[0]["content"].startswith("Say in one sentence, in Russian,")
    assert doc(chat.requests[0][0])["transcript"] == [f"{i}. {t}" for i, t in enumerate(doc(messages)["transcript"], 1)]
    assert schema["properties"]["brief"]["maxItems"] == 1 and schema["properties"]["brief"]["minItems"] == 1
    sentence = schema["properties"]["brief"]["items"]["properties"]["sentence"]
    assert re.match(sentence["pattern"], "Запись") and not re.match(sentence["pattern"], "A note")
    assert found.text == "Запись о городских новостях." and found.topics == ["Мост"]
    assert any("nothing usable in the first answer (it proposed no sentence)" in n for n in found.notes)


async def test_two_answers_with_nothing_usable_leave_no_brief_and_say_why() -> None:
    # The first answer's sentence quotes what was never said; the simpler one proposes nothing.
    chat = Scripted(
        lambda m, s: (
            {"brief": [], "topics": []}
            if m[0]["content"].startswith("Say in one sentence")
            else {"brief": [{"quote": "маяк погас в полночь навсегда", "sentence": "Маяк погас."}], "topics": []}
        )
    )
    found = await summarize(chat, voice_note())
    assert len(chat.requests) == 2 and found.brief == [] and found.proposed == 1
    assert found.missing == (
        "the model's first answer gave nothing usable (none of its 1 sentences is backed by the transcript), "
        "nor did a simpler request (it proposed no sentence)"
    )


def test_the_openai_engine_sends_as_many_at_once_as_configured() -> None:
    from pydantic import SecretStr

    from sidecar.insights.engines import OpenAIEngine
    from sidecar.runtime.clock import FakeClock
    from sidecar.settings import InsightsSettings

    async def opened(parallel: int) -> int:
        settings = InsightsSettings(provider="openai", model="m", api_key=SecretStr("k"), parallel=parallel)
        async with OpenAIEngine(settings, FakeClock()).open() as chat:
            return chat.parallel

    assert anyio.run(opened, 1) == 1 and anyio.run(opened, 3) == 3


async def test_the_offline_engine_is_asked_for_json_without_whitespace() -> None:
    from pathlib import Path

    from sidecar.insights.offline import OfflineChat
    from sidecar.insights.prompt import answer_schema
    from sidecar.runtime.clock import FakeClock

    chat = OfflineChat("http://127.0.0.1:9", Path("model.gguf"), "key", 8192, FakeClock())
    try:
        body = chat._body([{"role": "user", "content": "x"}], answer_schema(3), 100)
    finally:
        await chat.aclose()
    assert "response_format" not in body
    head, schema = body["grammar"].split("start: %json ", 1)
    assert head == "%llguidance {}\n"
    assert json.loads(schema) == {**answer_schema(3), "x-guidance": {"whitespace_flexible": False}}


async def test_a_speakers_label_copied_before_a_sentence_is_taken_off() -> None:
    source, _ = meeting(3)
    brief = [{"quote": "we agreed that team 1 ships", "sentence": "S2: Team 1 ships item 1."}]
    found = await summarize(Scripted(lambda m, s: {"brief": brief, "topics": []}), source)
    assert [q.sentence for q in found.brief] == ["Team 1 ships item 1."]


async def test_the_brief_is_in_the_order_the_meeting_said_it_whatever_the_models_order() -> None:
    source, _ = meeting(4)
    brief = [
        {"quote": "we agreed that team 3 ships", "sentence": "Team 3 ships item 3."},
        {"quote": "we agreed that team 0 ships", "sentence": "Team 0 ships item 0."},
        {"quote": "we agreed that team 2 ships", "sentence": "Team 2 ships item 2."},
    ]
    found = await summarize(Scripted(lambda m, s: {"brief": brief, "topics": []}), source)
    assert [(q.sentence, q.start) for q in found.brief] == [
        ("Team 0 ships item 0.", 0.0),
        ("Team 2 ships item 2.", 20.0),
        ("Team 3 ships item 3.", 30.0),
    ]


async def test_a_voice_notes_about_that_names_nothing_is_dropped_and_one_that_does_ends_as_a_sentence() -> None:
    # What the 1.5B model wrote for a note of five plain statements: "an explanation of the events described".
    vague = {"about": "Объяснение описанных событиях", "points": [1, 6], "topics": ["Погода"]}
    found = await summarize(Scripted(lambda m, s: vague), voice_note())
    assert [q.sentence for q in found.brief] == [VOICE_NOTE[0], VOICE_NOTE[5]]
    assert any("'Объяснение описанных событиях.': " in n and "names nothing" in n for n in found.notes)
    named = {"about": "Городские новости: маяк и мост", "points": [1], "topics": ["Погода"]}
    found = await summarize(Scripted(lambda m, s: named), voice_note())
    assert found.text == f"Городские новости: маяк и мост. {VOICE_NOTE[0]}"

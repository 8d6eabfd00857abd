// I4: the transcript as txt, SRT, WebVTT or JSON, from the kept segments.
//
// Subtitle players are strict, and segments come from several providers: the
// cues are put in time order, empty ones dropped, none ends before it starts,
// each is one line (a blank line would end it), every time is finite, and a
// cue's text can never read as a timing line ("-->") or as markup.

function stamp(sec, sep) {
  const ms = Math.max(0, Math.round(Number(sec) * 1000) || 0);
  const h = Math.floor(ms / 3600000);
  const m = Math.floor((ms % 3600000) / 60000);
  const s = Math.floor((ms % 60000) / 1000);
  const pad = (n, w) => String(n).padStart(w, "0");
  return pad(h, 2) + ":" + pad(m, 2) + ":" + pad(s, 2) + sep + pad(ms % 1000, 3);
}

// The segments as stored: JSON text, "[]" when there are none. A JSON field reads as raw bytes in the JS
// runtime: decoded as text here, once.
function segmentsText(row) {
  const raw = toString(row.get("segments")).trim();
  return raw.charAt(0) === "[" ? raw : "[]";
}

function segmentsOf(row) {
  const segs = JSON.parse(segmentsText(row));
  return Array.isArray(segs) ? segs : [];
}

function oneLine(text) {
  return String(text || "").split(/\s+/).filter((w) => w !== "").join(" ");
}

// The latest time a cue may name (about 2,777 hours): a stored 1e300 cannot
// become a stamp no player reads.
const MAX_SECONDS = 1e7;

// A time in seconds if it is a finite number, clamped to [0, MAX_SECONDS]; else null.
function seconds(v) {
  const n = Number(v);
  return typeof v !== "boolean" && v !== null && v !== "" && isFinite(n) ? Math.min(Math.max(0, n), MAX_SECONDS) : null;
}

// [{start, end, text, speaker}] in seconds: sorted by start, non-empty, end >= start,
// every time finite (a cue without a usable start follows the one before it). The one
// rule for cues: SRT, WebVTT, txt with speakers and the JSON export's `cues` (the
// sender's page shows those) are all made from it.
function cues(segs) {
  const out = [];
  let previous = 0;
  for (const s of segs) {
    const text = oneLine(s && s.text);
    if (!text) continue;
    const given = seconds(s.start);
    const start = given === null ? previous : given;
    const end = Math.max(start, seconds(s.end) === null ? start : seconds(s.end));
    previous = end;
    out.push({ start: start, end: end, text: text, speaker: speakerOf(s) });
  }
  // Array.prototype.sort is stable: equal starts keep the provider's order.
  return out.sort((a, b) => a.start - b.start);
}

// SP2: a segment's speaker ("Speaker 1", or a name the owner gave), or null.
// The sidecar labels segments only when it heard more than one speaker.
function speakerOf(s) {
  const label = s && typeof s.speaker === "string" ? oneLine(s.speaker) : "";
  return label === "" ? null : label;
}

// Speaker prefixes ("Speaker 1: …") in txt and SRT, only when someone is named.
function prefixed(c) {
  return c.speaker ? c.speaker + ": " + c.text : c.text;
}

function toSrt(segs) {
  return cues(segs)
    .map((c, i) => (i + 1) + "\n" + stamp(c.start, ",") + " --> " + stamp(c.end, ",") + "\n" +
      // SRT has no escapes, and players render <font>, <b>, even what looks like a tag:
      // angle brackets become look-alikes, which also defuses "-->".
      prefixed(c).split("<").join("‹").split(">").join("›") + "\n")
    .join("\n");
}

function toVtt(segs) {
  // Cue text is markup: escaping "&", "<" and ">" also defuses "-->".
  const escapeMarkup = (t) => t.split("&").join("&amp;").split("<").join("&lt;").split(">").join("&gt;");
  // A voice span names the speaker (<v Speaker 1>); its annotation ends at ">".
  const voiced = (c) => (c.speaker ? "<v " + escapeMarkup(c.speaker) + ">" : "") + escapeMarkup(c.text);
  const body = cues(segs).map((c) => stamp(c.start, ".") + " --> " + stamp(c.end, ".") + "\n" + voiced(c) + "\n");
  return ["WEBVTT\n"].concat(body).join("\n");
}

// txt with speakers: one paragraph per turn ("Speaker 1: …"); without, the text as kept.
function toTxt(row, segs) {
  const all = cues(segs);
  if (!all.some((c) => c.speaker)) return row.getString("content");
  const turns = [];
  for (const c of all) {
    const last = turns[turns.length - 1];
    if (last && last.speaker === c.speaker) last.text += " " + c.text;
    else turns.push({ speaker: c.speaker, text: c.text });
  }
  return turns.map((t) => prefixed(t)).join("\n\n") + "\n";
}

// `row` is the transcript (texts); `rec` its recording, for the language found.
// `insight` (JSON only): the brief, the quotes that ground it and the topics (lib/insights.js `view`).
function render(row, format, rec, insight) {
  if (format === "json") {
    // The stored segments go out as they are (the sidecar wrote them in the export's shape): they are
    // not written again on every download. Beside them, `cues`: the segments as SRT and WebVTT time
    // them (`cues()`), which the sender's page shows, so no reader derives cues of its own. That
    // reads the segments, as SRT and WebVTT do (six hours with word timings: about 0.6 s more).
    const language = rec ? rec.getString("language") || null : null;
    const head = JSON.stringify({ text: row.getString("content"), language: language });
    const tail = insight
      ? "," + JSON.stringify({ brief: insight.brief, quotes: insight.quotes, topics: insight.topics }).slice(1)
      : "}";
    const timed = ',"cues":' + JSON.stringify(cues(segmentsOf(row)));
    return { type: "application/json", body: head.slice(0, -1) + ',"segments":' + segmentsText(row) + timed + tail };
  }
  // Plain text without speakers is the content as kept: nothing to read in the segments.
  if (format === "txt" && segmentsText(row).indexOf('"speaker"') < 0) {
    return { type: "text/plain; charset=utf-8", body: row.getString("content") };
  }
  const segs = segmentsOf(row);
  if (format === "txt") return { type: "text/plain; charset=utf-8", body: toTxt(row, segs) };
  if (format === "srt") return { type: "application/x-subrip; charset=utf-8", body: toSrt(segs) };
  if (format === "vtt") return { type: "text/vtt; charset=utf-8", body: toVtt(segs) };
  return null;
}

module.exports = { render: render, stamp: stamp, segmentsOf: segmentsOf };

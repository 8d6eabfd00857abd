// H6: an owner's correction of a transcript's text reaches every export.
//
// The timed exports (SRT, WebVTT, JSON) are built from `segments`, which the
// correction does not touch. So when `content` changes, the segments are
// derived again from it: the corrected words are aligned with the recognized
// ones (a word-level diff), each corrected word goes to the segment its
// aligned word was in (an inserted word to the one before it), and the
// segment times are kept. A changed segment loses its word timings (the new
// words have none) and says `corrected: true`; nothing of the old words
// survives, which matters when the correction removes a name.
const exports_ = require("./exports.js");
const journal = require("./journal.js");
const live = require("./live.js");
const stages = require("./stages.js");
const transitions = require("./transitions.js");

// Beyond this many differing words the diff would cost too much time; the
// words are then spread over the segments in proportion to their old length.
const MAX_EDITS = 1000;

function words(text) {
  return String(text || "").split(/\s+/).filter((w) => w !== "");
}

// Case and punctuation do not make words different for the alignment.
function key(word) {
  return word.toLowerCase().replace(/[^\p{L}\p{N}]+/gu, "");
}

// Myers' diff: pairs [i, j] of equal keys in a longest common subsequence of
// a and b, or null when more than MAX_EDITS insertions and deletions are needed.
function matches(a, b) {
  const n = a.length;
  const m = b.length;
  const offset = MAX_EDITS + 1;
  const v = Array.from({ length: 2 * offset + 1 }, () => 0);
  const trace = [];
  for (let d = 0; d <= MAX_EDITS; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) { x++; y++; }
      v[offset + k] = x;
      if (x >= n && y >= m) return backtrack(trace, offset, n, m);
    }
  }
  return null;
}

function backtrack(trace, offset, n, m) {
  const pairs = [];
  let x = n;
  let y = m;
  for (let d = trace.length - 1; d >= 0 && (x > 0 || y > 0); d--) {
    const v = trace[d];
    const k = x - y;
    const prevK = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? k + 1 : k - 1;
    const prevX = d === 0 ? 0 : v[offset + prevK];
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) { x--; y--; pairs.push([x, y]); }
    if (d > 0) { x = prevX; y = prevY; }
  }
  return pairs.reverse();
}

// For each corrected word, the index of the segment it belongs to.
function owners(oldWords, newWords) {
  const owner = Array.from({ length: newWords.length }, () => -1);
  const pairs = matches(oldWords.map((w) => key(w.text)), newWords.map(key));
  if (pairs === null) {
    for (let j = 0; j < newWords.length; j++) {
      owner[j] = oldWords.length === 0 ? 0 : oldWords[Math.floor(j * oldWords.length / newWords.length)].seg;
    }
    return owner;
  }
  for (const [i, j] of pairs) owner[j] = oldWords[i].seg;
  // Inserted words join the segment before them; at the very start, the first one after.
  let last = -1;
  for (let j = 0; j < owner.length; j++) {
    if (owner[j] >= 0) last = owner[j];
    else owner[j] = last;
  }
  let next = oldWords.length > 0 ? oldWords[0].seg : 0;
  for (let j = owner.length - 1; j >= 0; j--) {
    if (owner[j] >= 0) next = owner[j];
    else owner[j] = next;
  }
  return owner;
}

// The segments for `content`, derived from `segments` (see the top of this file);
// `changed` counts the segments whose text differs.
function rederive(segments, content) {
  const oldWords = [];
  segments.forEach((s, i) => { for (const w of words(s && s.text)) oldWords.push({ text: w, seg: i }); });
  const newWords = words(content);
  const owner = owners(oldWords, newWords);
  const texts = segments.map(() => []);
  newWords.forEach((w, j) => { if (segments.length > 0) texts[owner[j]].push(w); });
  const out = [];
  segments.forEach((s, i) => {
    const text = texts[i].join(" ");
    if (text === "") return;
    if (text === words(s.text).join(" ")) {
      out.push(s);
      return;
    }
    const changed = Object.assign({}, s, { text: text, corrected: true });
    delete changed.words;
    out.push(changed);
  });
  return out;
}

// A cue holds about this many words when the text brings no timings of its own.
const CUE_WORDS = 12;
// Seconds per word when the recording's length is not known either.
const SECONDS_PER_WORD = 0.4;

// Segments for `content` where no timed segment exists to carry its words: a
// transcript emptied by an earlier correction, or a recording with no speech
// found whose text the owner wrote by hand. The words are cut into cues of
// about CUE_WORDS (at a sentence's end where one is near) spread over the
// recording, each in proportion to its length in characters; all marked corrected.
function spread(content, seconds) {
  const all = words(content);
  if (all.length === 0) return [];
  const chunks = [];
  let chunk = [];
  for (const w of all) {
    chunk.push(w);
    const sentenceEnd = /[.!?…]["»”')\]]*$/.test(w);
    if ((chunk.length >= CUE_WORDS && sentenceEnd) || chunk.length >= CUE_WORDS * 2) {
      chunks.push(chunk);
      chunk = [];
    }
  }
  if (chunk.length > 0) chunks.push(chunk);
  const total = seconds > 0 ? seconds : all.length * SECONDS_PER_WORD;
  const chars = chunks.map((c) => c.join(" ").length + 1);
  const sum = chars.reduce((a, b) => a + b, 0);
  const out = [];
  let at = 0;
  chunks.forEach((c, i) => {
    const end = i === chunks.length - 1 ? total : at + total * chars[i] / sum;
    out.push({ start: Math.round(at * 1000) / 1000, end: Math.round(end * 1000) / 1000, text: c.join(" "), corrected: true });
    at = end;
  });
  return out;
}

// The recording's length in seconds, as normalize stored it; 0 when unknown.
function durationOf(app, recordId) {
  return app.findRecordById("audio_records", recordId).getInt("duration_ms") / 1000;
}

// Before an owner's save of a `texts` row: when the content changed, the
// segments follow it, and the recording's journal says so (without the words).
function followContent(app, row) {
  const before = row.original().getString("content");
  const after = row.getString("content");
  if (before === after) return;
  const recordId = row.getString("record");
  let segments = rederive(exports_.segmentsOf(row.original()), after);
  let how = " timed segments follow the new text";
  if (segments.length === 0 && words(after).length > 0) {
    // Nothing timed to carry the words: they are spread over the recording.
    segments = spread(after, durationOf(app, recordId));
    how = " segments spread over the recording (no timed segment was left to follow)";
  }
  row.set("segments", segments);
  // The transcript's Word document held the old words: gone, made again with the literary text below.
  if (row.getString("kind") === "transcript") row.set("document", null);
  const changed = segments.filter((s) => s.corrected).length;
  const rec = app.findRecordById("audio_records", recordId);
  journal.add(app, rec.id, rec.getString("state"), "note",
    row.getString("kind") + " corrected by the owner: " + changed + " of " + segments.length + how, "owner");
  // The literary text was made from the old words: it is made again (the brief is not: the
  // owner reruns it when they want, as it costs a language model's time).
  if (row.getString("kind") === "transcript" && stages.isTerminal(rec.getString("state"))) {
    transitions.queueFollowUp(app, "literary", rec.id, Date.now(), "owner", "the transcript was corrected");
    live.publish(app, rec.id, rec.getString("owner"));  // the sender's page: the text is being made again
  }
}

module.exports = { followContent: followContent };

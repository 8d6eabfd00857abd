// The words a sender teaches recognition: names and terms their recordings use
// (`users.words`, one per line or separated by commas) and the names of their
// topics dictionary. Recognition is biased towards them (the offline engine's
// hotwords, an OpenAI-compatible server's prompt), so "Кшесинская" is heard as
// written rather than as the nearest common words.
const respond = require("./respond.js");

// At most this many words are handed to recognition, each at most this many
// characters: the decoder's prompt holds about 220 tokens, and a long list would
// crowd out the speech it is meant to help.
const MAX_WORDS = 60;
const MAX_WORD_CHARS = 60;
// The field's own bound (bytes and characters: the panel's editor and the route check it).
const MAX_FIELD_CHARS = 4000;

// The field's text as a list: trimmed, empty ones and repeats (any case) left out, in the order given.
function parse(text) {
  const out = [];
  const seen = {};
  for (const raw of String(text || "").split(/[\n,;]+/)) {
    const word = raw.trim().replace(/\s+/g, " ");
    if (word === "" || Array.from(word).length > MAX_WORD_CHARS) continue;
    const key = word.toLowerCase();
    if (seen[key]) continue;
    seen[key] = true;
    out.push(word);
  }
  return out;
}

// What recognition of the sender's recording is biased towards: their own words first, then their topics.
function of(tx, ownerId) {
  if (!ownerId) return [];
  let own = [];
  try {
    own = parse(tx.findRecordById("users", ownerId).getString("words"));
  } catch (_) {
    return []; // the sender is gone: nothing to teach
  }
  const topics = tx.findRecordsByFilter("topics", "owner = {:o}", "name", 0, 0, { o: ownerId }).map((t) => t.getString("name"));
  return parse(own.concat(topics).join("\n")).slice(0, MAX_WORDS);
}

// GET /api/transcriber/words: the signed-in sender's words, as stored and as a list.
function read(e) {
  const user = $app.findRecordById("users", e.auth.id);
  return e.json(200, view(user.getString("words")));
}

// PUT /api/transcriber/words with {"words": "…"}: the sender's new list (replaces the old one).
function write(e) {
  let body;
  try {
    body = e.requestInfo().body || {};
  } catch (_) {
    return respond.fail(e, 400, "invalid_words", "Send a JSON object with a 'words' string.");
  }
  if (typeof body.words !== "string") return respond.fail(e, 400, "invalid_words", "Send a JSON object with a 'words' string.");
  for (const key in body) {
    if (key !== "words") return respond.fail(e, 400, "unknown_field", "Only 'words' can be sent here.");
  }
  if (body.words.indexOf("\u0000") >= 0) return respond.fail(e, 400, "invalid_words", "The words hold a NUL character.");
  const chars = Array.from(body.words).length;
  if (chars > MAX_FIELD_CHARS) {
    return respond.fail(e, 400, "words_too_long", "The words are " + chars + " characters; at most " + MAX_FIELD_CHARS + " are kept.");
  }
  const text = parse(body.words).join("\n");
  $app.runInTransaction((tx) => {
    tx.db().newQuery("UPDATE users SET words = {:w} WHERE id = {:id}").bind({ w: text, id: e.auth.id }).execute();
  });
  return e.json(200, view(text));
}

function view(text) {
  return { words: text, list: parse(text), max_words: MAX_WORDS, max_chars: MAX_FIELD_CHARS };
}

module.exports = { parse: parse, of: of, read: read, write: write, MAX_WORDS: MAX_WORDS, MAX_FIELD_CHARS: MAX_FIELD_CHARS };

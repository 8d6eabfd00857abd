// I4: the transcript as txt, SRT, WebVTT or JSON, from the kept segments.

function stamp(sec, sep) {
  const ms = Math.max(0, Math.round(sec * 1000));
  const h = Math.floor(ms / 3600000);
  const m = Math.floor((ms % 3600000) / 60000);
  const s = Math.floor((ms % 60000) / 1000);
  const pad = (n, w) => String(n).padStart(w, "0");
  return pad(h, 2) + ":" + pad(m, 2) + ":" + pad(s, 2) + sep + pad(ms % 1000, 3);
}

function segmentsOf(row) {
  // A JSON field reads as raw bytes in the JS runtime: decode it as text first.
  const raw = toString(row.get("segments"));
  if (!raw || raw === "null") return [];
  const segs = JSON.parse(raw);
  return Array.isArray(segs) ? segs : [];
}

function cueText(s) {
  return String(s.text || "").trim().replace(/\n+/g, " ");
}

function render(row, format) {
  const segs = segmentsOf(row);
  if (format === "txt") return { type: "text/plain; charset=utf-8", body: row.getString("content") };
  if (format === "json") {
    return { type: "application/json", body: JSON.stringify({ text: row.getString("content"), segments: segs }) };
  }
  if (format === "srt") {
    const cues = segs.map((s, i) => (i + 1) + "\n" + stamp(s.start, ",") + " --> " + stamp(s.end, ",") + "\n" + cueText(s) + "\n");
    return { type: "application/x-subrip; charset=utf-8", body: cues.join("\n") };
  }
  if (format === "vtt") {
    const cues = segs.map((s) => stamp(s.start, ".") + " --> " + stamp(s.end, ".") + "\n" + cueText(s) + "\n");
    return { type: "text/vtt; charset=utf-8", body: "WEBVTT\n\n" + cues.join("\n") };
  }
  return null;
}

module.exports = { render: render, stamp: stamp };

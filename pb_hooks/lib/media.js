// Cheap container sniffing for intake: what the first bytes can tell.
// Decoding problems (corrupt streams, no audio track) are found by the
// pipeline's normalize step and end in a halt with a code.

function ascii(bytes, from, len) {
  let s = "";
  for (let i = from; i < from + len && i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
  return s;
}

function startsWith(bytes, sig, at) {
  const off = at || 0;
  if (bytes.length < off + sig.length) return false;
  for (let i = 0; i < sig.length; i++) if (bytes[off + i] !== sig[i]) return false;
  return true;
}

// Returns a short container name, or "" when the bytes match no known
// audio/video container.
function sniff(bytes) {
  const b = bytes;
  if (ascii(b, 0, 4) === "RIFF" && ["WAVE", "AVI ", "RMP3"].indexOf(ascii(b, 8, 4)) >= 0) return "riff";
  if (ascii(b, 0, 4) === "RF64" || ascii(b, 0, 4) === "BW64") return "wav64";
  if (ascii(b, 0, 4) === "fLaC") return "flac";
  if (ascii(b, 0, 4) === "OggS") return "ogg";
  if (ascii(b, 0, 3) === "ID3") return "mp3";
  if (ascii(b, 4, 4) === "ftyp") return "mp4";
  if (startsWith(b, [0x1a, 0x45, 0xdf, 0xa3])) return "matroska";
  if (ascii(b, 0, 4) === "FORM" && ["AIFF", "AIFC"].indexOf(ascii(b, 8, 4)) >= 0) return "aiff";
  if (ascii(b, 0, 5) === "#!AMR") return "amr";
  if (ascii(b, 0, 4) === "caff") return "caf";
  if (ascii(b, 0, 4) === ".snd") return "au";
  if (ascii(b, 0, 4) === "wvpk") return "wavpack";
  if (ascii(b, 0, 4) === "MAC ") return "ape";
  if (ascii(b, 0, 3) === "FLV") return "flv";
  if (startsWith(b, [0x30, 0x26, 0xb2, 0x75, 0x8e, 0x66, 0xcf, 0x11])) return "asf";
  if (startsWith(b, [0x00, 0x00, 0x01, 0xba])) return "mpeg-ps";
  if (b.length > 188 && b[0] === 0x47 && b[188] === 0x47) return "mpeg-ts";
  // MPEG audio frame / ADTS: 11 sync bits; layer bits 00 only for ADTS (AAC).
  if (b.length >= 2 && b[0] === 0xff && (b[1] & 0xe0) === 0xe0) {
    const version = (b[1] >> 3) & 0x03;
    const layer = (b[1] >> 1) & 0x03;
    if (layer !== 0 && version !== 1) return "mpeg-audio";
    if (layer === 0 && (b[1] & 0xf6) === 0xf0) return "adts";
  }
  return "";
}

module.exports = { sniff: sniff };

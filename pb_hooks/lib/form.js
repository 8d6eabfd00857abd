// The intake's multipart form, read part by part under byte bounds (H7).
//
// PocketBase's own form reader keeps up to 42 MB of text fields in memory
// (Go's reader, with at least 10 MB for them whatever it is asked), and a
// JS string made of a 20 MB title cost about 100 bytes a character to count.
// Here each text field is read up to its bound plus one byte and refused past
// it, before anything decodes or counts it: a 20 MB title costs a few KB.
// The file part streams to a temporary file in Go (as PocketBase's reader
// does), never through JS.

class Refused extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// Go's io.EOF as it reaches JS: the form's end, not a fault.
function isEnd(err) {
  return /^(GoError: )?EOF$/.test(String(err));
}

// A read that failed: PocketBase's body limit, or a form that is not well made.
function readFailure(err, maxMb) {
  if (err instanceof Refused) return err;
  if (String(err).indexOf("too large") >= 0) {
    return new Refused(413, "too_large", "The upload is larger than the limit of " + maxMb + " MB.");
  }
  return new Refused(400, "bad_upload", "The upload could not be read as multipart form data.");
}

// A name the temporary file can carry: the sender's, when the filesystem takes it.
function fileNameOf(part) {
  const name = String(part.fileName()); // Go's reader keeps only the last path element
  if (name === "." || name === ".." || name.indexOf("\u0000") >= 0 || toBytes(name).length > 200) return "upload";
  return name;
}

// The file part, streamed to a temporary file: {path, dir, name, size}. The
// file carries the sender's name in a directory of its own, so the stored
// blob is named after it as PocketBase names uploads.
function spool(part, maxMb) {
  const dir = "transcriber-upload-" + $security.randomString(24);
  const name = fileNameOf(part);
  const root = $os.openRoot($os.tempDir());
  let size = 0;
  try {
    root.mkdir(dir, 0o700);
    const out = root.create(dir + "/" + name);
    try {
      size = out.readFrom(part);
    } finally {
      out.close();
    }
  } catch (err) {
    try {
      root.removeAll(dir);
    } catch (_) { /* never made */ }
    throw readFailure(err, maxMb);
  } finally {
    root.close();
  }
  const at = $os.tempDir() + "/" + dir;
  return { path: at + "/" + name, dir: at, name: String(part.fileName()), size: size };
}

// Reads the request's form. `spec`:
//   file      the name of the one file field
//   fields    text field name → its bound in bytes
//   tooLong   (name, bound) → the Refused for a text field past its bound
//   maxParts  parts in all, the file's included
//   maxMb     the upload limit, for the message when PocketBase's body limit is met
// Returns {values: {name: first value}, file: {path, name, size} | null,
// unknown: [{name, file}] (parts of other names, never read)}; throws Refused. The caller removes the file (`discard`) when done with it.
function read(e, spec) {
  let reader;
  try {
    reader = e.request.multipartReader();
  } catch (err) {
    throw readFailure(err, spec.maxMb);
  }
  const out = { values: {}, file: null, unknown: [] };
  let parts = 0;
  try {
    for (;;) {
      let part;
      try {
        part = reader.nextPart();
      } catch (err) {
        if (isEnd(err)) break;
        throw readFailure(err, spec.maxMb);
      }
      parts++;
      if (parts > spec.maxParts) {
        throw new Refused(400, "bad_upload", "The form has too many parts: send one '" + spec.file + "' and at most " +
          Object.keys(spec.fields).map((f) => "'" + f + "'").join(" and ") + ".");
      }
      const name = String(part.formName());
      if (name === "") continue; // not a form field (Go's reader skips these too)
      if (String(part.fileName()) !== "") {
        if (name !== spec.file) {
          out.unknown.push({ name: name, file: true }); // never read: the next part skips it
          continue;
        }
        if (out.file) throw new Refused(400, "too_many_files", "Send exactly one recording per request.");
        out.file = spool(part, spec.maxMb);
        continue;
      }
      const bound = spec.fields[name];
      if (bound === undefined) {
        out.unknown.push({ name: name, file: false });
        continue;
      }
      let bytes;
      try {
        bytes = toBytes(part, bound + 1);
      } catch (err) {
        throw readFailure(err, spec.maxMb);
      }
      if (bytes.length > bound) throw spec.tooLong(name, bound);
      if (!(name in out.values)) out.values[name] = toString(bytes);
    }
  } catch (err) {
    discard(out.file);
    throw err;
  }
  return out;
}

function discard(file) {
  if (!file) return;
  try {
    $os.removeAll(file.dir);
  } catch (_) { /* already gone */ }
}

module.exports = { read: read, discard: discard, Refused: Refused };

// The column names of a table file chosen for upload, read in the browser so that the target can be
// picked from them before anything is sent: the header of a CSV (gzipped too), the keys of the first
// JSON record, or the schema in a Parquet file's footer. A file that is not a table (an image renamed
// .csv) is refused before any column is offered (`NotATable`), as the API refuses it (app/core/tables.py).

const HEAD_BYTES = 256 * 1024;
const CHECKED_BYTES = 8 * 1024; // the bytes whose kind is checked: a text table's start is text
// the starts of files often chosen by mistake, named as people know them (app/core/tables.py BINARY_SIGNATURES)
const SIGNATURES = [
  [[0x89, 0x50, 0x4e, 0x47], "a PNG image"], [[0xff, 0xd8, 0xff], "a JPEG image"], [[0x47, 0x49, 0x46, 0x38], "a GIF image"],
  [[0x25, 0x50, 0x44, 0x46], "a PDF document"], [[0x50, 0x4b, 0x03, 0x04], "a ZIP archive (an Excel workbook, say)"],
];

/** A file that is not a table: its message says what it holds and what to choose instead. */
export class NotATable extends Error {}

/** Column names of `file` (a File), in file order; a NotATable where it holds no text table nor Parquet. */
export async function columnsOfFile(file) {
  const magic = new Uint8Array(await file.slice(0, 4).arrayBuffer());
  if (String.fromCharCode(...magic) === "PAR1") return parquetColumns(file);
  const gzipped = magic[0] === 0x1f && magic[1] === 0x8b;
  checkText(await leadingBytes(file, gzipped, CHECKED_BYTES));
  const text = await leadingText(file, gzipped);
  const start = text.replace(/^\uFEFF/, "").trimStart();
  const columns = start.startsWith("[") || start.startsWith("{") ? firstRecordKeys(start) : csvHeader(start);
  if (!columns.length) throw new Error("no column names found at the start of the file");
  return columns;
}

/** Refuses bytes that are not the start of a text table: a known binary kind, a zero byte or text not in UTF-8. */
function checkText(bytes) {
  let kind = SIGNATURES.find(([signature]) => signature.every((byte, i) => bytes[i] === byte))?.[1]
    ?? (bytes.includes(0) ? "binary data" : null);
  if (!kind) {
    try { new TextDecoder("utf-8", { fatal: true }).decode(bytes, { stream: true }); } catch { kind = "text that is not UTF-8"; }
  }
  if (kind) {
    throw new NotATable(`This file is not a table: it holds ${kind}, not the text of a CSV or JSON table. `
      + "Choose a CSV (gzipped too), Parquet or JSON file" + (kind.startsWith("text") ? ", or save this one as UTF-8." : "."));
  }
}

/** The first `count` bytes of `file` (inflated where it is gzipped). */
async function leadingBytes(file, gzipped, count) {
  if (!gzipped) return new Uint8Array(await file.slice(0, count).arrayBuffer());
  const reader = file.stream().pipeThrough(new DecompressionStream("gzip")).getReader();
  const bytes = new Uint8Array(count);
  let length = 0;
  while (length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    const taken = value.subarray(0, count - length);
    bytes.set(taken, length);
    length += taken.length;
  }
  reader.cancel().catch(() => {});
  return bytes.subarray(0, length);
}

async function leadingText(file, gzipped) {
  let stream = file.stream();
  if (gzipped) stream = stream.pipeThrough(new DecompressionStream("gzip"));
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let text = "";
  while (text.length < HEAD_BYTES) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  reader.cancel().catch(() => {});
  return text;
}

function csvHeader(text) {
  const names = [];
  let name = "", quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const char = text[i];
    if (quoted) {
      if (char === '"' && text[i + 1] === '"') { name += '"'; i += 1; }
      else if (char === '"') quoted = false;
      else name += char;
    } else if (char === '"') quoted = true;
    else if (char === ",") { names.push(name.trim()); name = ""; }
    else if (char === "\n" || char === "\r") break;
    else name += char;
  }
  names.push(name.trim());
  return names.filter(Boolean);
}

function firstRecordKeys(text) {
  const start = text.indexOf("{");
  let depth = 0, inString = false;
  for (let i = start; start >= 0 && i < text.length; i += 1) {
    const char = text[i];
    if (inString) {
      if (char === "\\") i += 1;
      else if (char === '"') inString = false;
    } else if (char === '"') inString = true;
    else if (char === "{" || char === "[") depth += 1;
    else if (char === "}" || char === "]") {
      depth -= 1;
      if (depth === 0) return Object.keys(JSON.parse(text.slice(start, i + 1)));
    }
  }
  throw new Error("the first JSON record does not end within the first 256 KiB");
}

// ---- Parquet: FileMetaData (Thrift compact protocol) at the end of the file --------------------------

async function parquetColumns(file) {
  const tail = new DataView(await file.slice(-8).arrayBuffer());
  const footerLength = tail.getUint32(0, true);
  const footer = new Uint8Array(await file.slice(-8 - footerLength, -8).arrayBuffer());
  const schema = new CompactReader(footer).struct()[2]; // FileMetaData.schema: list<SchemaElement>
  const names = [];
  let next = 1; // schema[0] is the root; its children follow, each with its own subtree depth first
  for (let child = 0; child < (schema[0][5] ?? 0); child += 1) {
    names.push(new TextDecoder().decode(schema[next][4])); // SchemaElement.name
    next = skipSubtree(schema, next);
  }
  return names;
}

function skipSubtree(schema, index) {
  let next = index + 1;
  for (let child = 0; child < (schema[index][5] ?? 0); child += 1) next = skipSubtree(schema, next);
  return next;
}

class CompactReader {
  constructor(bytes) { this.bytes = bytes; this.at = 0; }

  byte() { return this.bytes[this.at++]; }

  varint() {
    let value = 0, scale = 1, byte;
    do { byte = this.byte(); value += (byte & 0x7f) * scale; scale *= 128; } while (byte & 0x80);
    return value;
  }

  zigzag() { const n = this.varint(); return n % 2 ? -(n + 1) / 2 : n / 2; }

  value(type) {
    switch (type) {
      case 1: return true;
      case 2: return false;
      case 3: return this.byte();
      case 4: case 5: case 6: return this.zigzag();
      case 7: this.at += 8; return null;
      case 8: { const length = this.varint(); this.at += length; return this.bytes.subarray(this.at - length, this.at); }
      case 9: case 10: return this.list();
      case 11: return this.map();
      case 12: return this.struct();
      default: throw new Error(`not a Parquet footer (Thrift type ${type})`);
    }
  }

  list() {
    const header = this.byte();
    const size = header >> 4 === 15 ? this.varint() : header >> 4;
    const type = header & 15;
    return Array.from({ length: size }, () => (type === 1 || type === 2 ? this.byte() === 1 : this.value(type)));
  }

  map() {
    const size = this.varint();
    if (!size) return [];
    const types = this.byte();
    return Array.from({ length: size }, () => [this.value(types >> 4), this.value(types & 15)]);
  }

  struct() {
    const fields = {};
    let id = 0;
    for (;;) {
      const header = this.byte();
      if (header === 0) return fields;
      id = header >> 4 ? id + (header >> 4) : this.zigzag();
      fields[id] = this.value(header & 15);
    }
  }
}

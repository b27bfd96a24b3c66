// Which columns of a table file chosen for upload hold only 0/1 (or true/false) in its first rows: the columns a
// survival table's event column can be (the service reads it as 1/true where the event happened, 0/false where
// censored). Read in the browser from the file's first 256 KiB: a CSV (gzipped too) or JSON records; a Parquet
// file's values are not read here (null: unknown).

const HEAD_BYTES = 256 * 1024;
const EVENT_VALUES = new Set(["0", "1", "0.0", "1.0", "true", "false"]); // app/core/tables.py's, lower case

async function leadingText(file) {
  const magic = new Uint8Array(await file.slice(0, 2).arrayBuffer());
  let stream = file.stream();
  if (magic[0] === 0x1f && magic[1] === 0x8b) stream = stream.pipeThrough(new DecompressionStream("gzip"));
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let text = "", complete = false;
  while (text.length < HEAD_BYTES) {
    const { value, done } = await reader.read();
    if (done) { complete = true; break; }
    text += value;
  }
  reader.cancel().catch(() => {});
  return { text: text.replace(/^\uFEFF/, ""), complete };
}

/** The rows of CSV text (quoted fields may hold commas, quotes and line ends), the last one left out where the
 * text was cut short. */
function csvRows(text, complete) {
  const rows = [];
  let row = [], cell = "", quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const char = text[i];
    if (quoted) {
      if (char === '"' && text[i + 1] === '"') { cell += '"'; i += 1; } else if (char === '"') quoted = false; else cell += char;
    } else if (char === '"') quoted = true;
    else if (char === ",") { row.push(cell); cell = ""; }
    else if (char === "\n" || char === "\r") {
      if (char === "\r" && text[i + 1] === "\n") i += 1;
      row.push(cell); rows.push(row); row = []; cell = "";
    } else cell += char;
  }
  if (complete && (cell || row.length)) { row.push(cell); rows.push(row); }
  return rows.filter(cells => cells.some(value => value.trim() !== ""));
}

/** The JSON records at the start of the text (those complete within it). */
function jsonRecords(text) {
  try {
    const parsed = JSON.parse(text);
    return Array.isArray(parsed) ? parsed : [parsed];
  } catch {
    const records = [];
    for (const match of text.matchAll(/\{[^{}]*\}/g)) { // flat records: a table's rows hold no nested objects
      try { records.push(JSON.parse(match[0])); } catch { /* cut short */ }
    }
    return records;
  }
}

/** The columns among `columns` whose values in the first rows of `file` are all 0/1 or true/false (a missing value
 * is none of them); null where the values cannot be read here (Parquet). */
export async function binaryColumns(file, columns) {
  const magic = new Uint8Array(await file.slice(0, 4).arrayBuffer());
  if (String.fromCharCode(...magic) === "PAR1") return null;
  const { text, complete } = await leadingText(file);
  const start = text.trimStart();
  let values; // column -> its values in the rows read
  if (start.startsWith("[") || start.startsWith("{")) {
    const records = jsonRecords(start).filter(record => record && typeof record === "object");
    values = new Map(columns.map(column => [column, records.map(record => record[column])]));
  } else {
    const [header = [], ...rows] = csvRows(start, complete);
    const names = header.map(name => name.trim());
    values = new Map(columns.map(column => [column, rows.map(cells => cells[names.indexOf(column)])]));
  }
  return columns.filter(column => {
    const read = values.get(column) ?? [];
    return read.length > 0 && read.every(value => value !== undefined && value !== null
      && EVENT_VALUES.has(String(value).trim().toLowerCase()));
  });
}

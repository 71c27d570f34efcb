// Bytes of a log file into lines: UTF-8 decoded across chunk boundaries, a trailing \r (a
// terminal's \r\n) dropped, and the unfinished last line held until its newline arrives.
import { StringDecoder } from 'node:string_decoder';

export class LineSplitter {
  private decoder = new StringDecoder('utf8');
  private rest = '';

  push(chunk: Buffer): string[] {
    const parts = (this.rest + this.decoder.write(chunk)).split('\n');
    this.rest = parts.pop() ?? '';
    return parts.map(chomp);
  }

  /** The unfinished line, if any (the file ended without a newline), and a fresh start. */
  flush(): string | null {
    const last = this.rest + this.decoder.end();
    this.rest = '';
    this.decoder = new StringDecoder('utf8');
    return last === '' ? null : chomp(last);
  }
}

const chomp = (line: string): string => (line.endsWith('\r') ? line.slice(0, -1) : line);

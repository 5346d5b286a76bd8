// Terminal input as a stream of keys: what one read may hold, split as a user pressed it.
import { describe, expect, test } from "bun:test";
import { KeyReader, parseKeys } from "../../src/tui/keys";

const names = (data: string) => parseKeys(data).map((k) => (k.kind === "char" ? k.ch : k.kind === "key" ? `<${k.name}>` : k.kind === "ctrl" ? `^${k.ch}` : k.kind === "mouse" ? `mouse ${k.button} ${k.x},${k.y}${k.press ? "" : " up"}` : `?${JSON.stringify(k.seq)}`));

describe("parseKeys", () => {
  test.each([
    ["43", ["4", "3"]],
    ["+++", ["+", "+", "+"]],
    ["\x1b[A\x1b[B\x1b[C\x1b[D", ["<up>", "<down>", "<right>", "<left>"]],
    ["j\x1b[Hk\x1b[F", ["j", "<home>", "k", "<end>"]],
    ["\x1b[1~\x1b[4~\x1b[7~\x1b[8~", ["<home>", "<end>", "<home>", "<end>"]],
    ["\x1bOA\x1bOB\x1bOH\x1bOF", ["<up>", "<down>", "<home>", "<end>"]],
    ["\x1b[5~\x1b[6~\x1b[3~", ["<pageup>", "<pagedown>", "<delete>"]],
    ["\x1b[1;5A", ["<up>"]],
    ["\x1b[Z\t\r", ["<backtab>", "<tab>", "<return>"]],
    ["\x1b", ["<escape>"]],
    ["\x1bq", ["<escape>", "q"]],
    ["\x03\x7f\x08", ["^c", "<backspace>", "<backspace>"]],
    ["\x1b[<0;10;5M\x1b[<0;10;5m", ["mouse 0 10,5", "mouse 0 10,5 up"]],
    ["\x1b[<64;1;1M\x1b[<65;300;90Mj", ["mouse 64 1,1", "mouse 65 300,90", "j"]],
    ["\x1b[2~x", ['?"\\u001b[2~"', "x"]],
    // Function keys as xterm and tmux send them (SS3 F1-F4, CSI N ~), with modifiers, rxvt's F1-F4
    // (CSI 11-14 ~) and the Linux console's (CSI [ A-E): htop's F1 F3 F4 F6 F9 F10 among them.
    ["\x1bOP\x1bOQ\x1bOR\x1bOS", ["<f1>", "<f2>", "<f3>", "<f4>"]],
    ["\x1b[1;2P\x1b[1;5R\x1b[P", ["<f1>", "<f3>", "<f1>"]],
    ["\x1b[11~\x1b[13~\x1b[14~\x1b[15~\x1b[17~\x1b[20~\x1b[21~\x1b[24~", ["<f1>", "<f3>", "<f4>", "<f5>", "<f6>", "<f9>", "<f10>", "<f12>"]],
    ["\x1b[17;2~j", ["<f6>", "j"]],
    ["\x1b[[A\x1b[[C\x1b[[Ej", ["<f1>", "<f3>", "<f5>", "j"]],
    ["é😀", ["é", "😀"]],
  ] as const)("%p", (data, want) => {
    expect(names(data)).toEqual([...want]);
  });
});

describe("KeyReader", () => {
  test("a sequence cut between two reads is one key; a lone ESC waits, then is the Escape key", () => {
    const r = new KeyReader();
    expect(r.push("j\x1b[")).toEqual([{ kind: "char", ch: "j" }]);
    expect(r.waiting).toBe(true);
    expect(r.push("Ak")).toEqual([{ kind: "key", name: "up" }, { kind: "char", ch: "k" }]);
    expect(r.push("\x1b[<0;12")).toEqual([]);
    expect(r.push(";7M")).toEqual([{ kind: "mouse", button: 0, x: 12, y: 7, press: true }]);
    expect(r.push("\x1b")).toEqual([]);
    expect(r.flush()).toEqual([{ kind: "key", name: "escape" }]);
    expect(r.waiting).toBe(false);
  });

  test("a function key cut after ESC O or ESC [ [ is one key, not Escape and a letter", () => {
    const r = new KeyReader();
    expect(r.push("\x1bO")).toEqual([]);
    expect(r.push("P")).toEqual([{ kind: "key", name: "f1" }]);
    expect(r.push("\x1b[[")).toEqual([]);
    expect(r.push("C")).toEqual([{ kind: "key", name: "f3" }]);
    expect(r.push("\x1b[2")).toEqual([]);
    expect(r.push("0~")).toEqual([{ kind: "key", name: "f9" }]);
  });
});

// Renders the HTML report of `wwref report` in headless Chromium and checks it:
//   - a PNG screenshot is written, is a real PNG of the window size, is not trivially small and is
//     not blank (it has many distinct colours and a share of coloured pixels: bars and heat maps);
//   - the DOM Chromium builds (--dump-dom) has one condition section per expected condition, each
//     with its two figures (response surface and effect heat map).
//
//   npx tsx scripts/check-report.ts REPORT.html [--png FILE] [--condition C …] [--height PX]
//
// Expected conditions default to the ones the report names (<meta name="wwref-conditions">, written by
// `wwref report` for the conditions it was asked for: any number of them), else every condition of the
// reference manifest (outputs/references, or WWREF_REFERENCES_DIR). Chromium is /usr/bin/chromium
// unless CHROMIUM names another binary.
// Exits 0 when every check passes, 1 otherwise (each failed check is printed).
import { execa } from 'execa';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { inflateSync } from 'node:zlib';
import { pathToFileURL } from 'node:url';

export const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

export interface CheckOptions {
  html: string;
  png: string;
  conditions: readonly string[];
  width?: number;
  height?: number;
}

export interface CheckResult {
  ok: boolean;
  problems: string[];
  png: { bytes: number; width: number; height: number; colours: number; colouredShare: number };
  sections: string[];
}

function chromiumArgs(profile: string, width: number, height: number): string[] {
  // --no-sandbox: Chromium refuses to run as root with the sandbox; a fresh profile avoids locks.
  return [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-dev-shm-usage',
    '--hide-scrollbars',
    `--user-data-dir=${profile}`,
    `--window-size=${width},${height}`,
  ];
}

/** Decodes an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium writes) into RGB triples. */
/** Distinct colours of a decoded image, and the share of its pixels that are coloured (not grey). */
export function colourStats(image: { width: number; height: number; rgb: Uint8Array }): { distinct: number; colouredShare: number } {
  const colours = new Set<number>();
  let coloured = 0;
  for (let k = 0; k < image.width * image.height; k++) {
    const [r, g, b] = [image.rgb[k * 3]!, image.rgb[k * 3 + 1]!, image.rgb[k * 3 + 2]!];
    colours.add((r << 16) | (g << 8) | b);
    if (Math.max(r, g, b) - Math.min(r, g, b) > 40) coloured++;
  }
  return { distinct: colours.size, colouredShare: coloured / (image.width * image.height) };
}

export function decodePng(bytes: Uint8Array): { width: number; height: number; rgb: Uint8Array } {
  const buf = Buffer.from(bytes);
  if (buf.length < 33 || buf.readUInt32BE(0) !== 0x89504e47) throw new Error('not a PNG file');
  let offset = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat: Buffer[] = [];
  while (offset < buf.length) {
    const length = buf.readUInt32BE(offset);
    const type = buf.toString('ascii', offset + 4, offset + 8);
    const data = buf.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const [depth, colourType, , , interlace] = [data[8], data[9], data[10], data[11], data[12]];
      if (depth !== 8 || interlace !== 0 || (colourType !== 2 && colourType !== 6))
        throw new Error(`unsupported PNG layout (depth ${depth}, colour type ${colourType}, interlace ${interlace})`);
      channels = colourType === 6 ? 4 : 3;
    } else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
    offset += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const pixels = new Uint8Array(stride * height);
  // Undo the per-row PNG filters (None, Sub, Up, Average, Paeth).
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    for (let x = 0; x < stride; x++) {
      const v = raw[y * (stride + 1) + 1 + x]!;
      const a = x >= channels ? pixels[y * stride + x - channels]! : 0;
      const b = y > 0 ? pixels[(y - 1) * stride + x]! : 0;
      const c = x >= channels && y > 0 ? pixels[(y - 1) * stride + x - channels]! : 0;
      let predictor = 0;
      if (filter === 1) predictor = a;
      else if (filter === 2) predictor = b;
      else if (filter === 3) predictor = (a + b) >> 1;
      else if (filter === 4) {
        const p = a + b - c;
        const [pa, pb, pc] = [Math.abs(p - a), Math.abs(p - b), Math.abs(p - c)];
        predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      pixels[y * stride + x] = (v + predictor) & 0xff;
    }
  }
  const rgb = new Uint8Array(width * height * 3);
  for (let k = 0; k < width * height; k++) rgb.set(pixels.subarray(k * channels, k * channels + 3), k * 3);
  return { width, height, rgb };
}

export async function checkReport(options: CheckOptions): Promise<CheckResult> {
  const width = options.width ?? 1400;
  const height = options.height ?? 2400;
  const url = pathToFileURL(resolve(options.html)).href;
  const problems: string[] = [];
  const profile = mkdtempSync(join(tmpdir(), 'wwref-chromium-'));
  const png = { bytes: 0, width: 0, height: 0, colours: 0, colouredShare: 0 };
  let sections: string[] = [];
  try {
    rmSync(options.png, { force: true });
    await execa(CHROMIUM, [...chromiumArgs(profile, width, height), `--screenshot=${resolve(options.png)}`, url], { timeout: 120_000 });
    if (!existsSync(options.png)) problems.push(`no screenshot written to ${options.png}`);
    else {
      png.bytes = statSync(options.png).size;
      if (png.bytes < 20_000) problems.push(`screenshot is only ${png.bytes} bytes`);
      const image = decodePng(readFileSync(options.png));
      png.width = image.width;
      png.height = image.height;
      if (image.width !== width || image.height !== height)
        problems.push(`screenshot is ${image.width}x${image.height}, expected ${width}x${height}`);
      const stats = colourStats(image);
      png.colours = stats.distinct;
      png.colouredShare = stats.colouredShare;
      if (png.colours < 50) problems.push(`screenshot has only ${png.colours} distinct colours (blank page?)`);
      if (png.colouredShare < 0.005)
        problems.push(`only ${(100 * png.colouredShare).toFixed(2)}% of the screenshot is coloured (no figures rendered?)`);
    }

    const { stdout: dom } = await execa(CHROMIUM, [...chromiumArgs(profile, width, height), '--dump-dom', url], {
      timeout: 120_000,
      maxBuffer: 256 * 1024 * 1024,
    });
    // Split the serialized DOM at each condition section and look at what each one holds.
    const parts = dom
      .split(/<section\b/)
      .slice(1)
      .filter((s) => /^[^>]*\bclass="condition"/.test(s));
    sections = parts.map((s) => /data-condition="([^"]*)"/.exec(s)?.[1] ?? '?');
    for (const id of options.conditions) {
      const body = parts[sections.indexOf(id)];
      if (body === undefined) problems.push(`condition section '${id}' is missing from the rendered DOM`);
      else if ((body.match(/<svg\b/g) ?? []).length < 2) problems.push(`condition section '${id}' lacks its two figures`);
      else if (!/class="surface"/.test(body) || !/class="heatmap"/.test(body))
        problems.push(`condition section '${id}' lacks the surface or the heat map`);
    }
    const unexpected = sections.filter((s) => !options.conditions.includes(s));
    if (unexpected.length) problems.push(`unexpected condition section(s): ${unexpected.join(', ')}`);
  } catch (error) {
    problems.push(`chromium failed: ${(error as Error).message.split('\n')[0]}`);
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
  return { ok: problems.length === 0, problems, png, sections };
}

/**
 * A page as headless Chromium leaves it once its scripts ran and its images loaded (the DOM, serialized)
 * and what the page wrote to its console (each message, as Chromium logs it).
 */
export async function renderedPage(html: string): Promise<{ dom: string; console: string[] }> {
  const profile = mkdtempSync(join(tmpdir(), 'wwref-chromium-'));
  try {
    const { stdout, stderr } = await execa(
      CHROMIUM,
      [
        ...chromiumArgs(profile, 1400, 2400),
        '--enable-logging=stderr',
        '--v=0',
        '--virtual-time-budget=5000',
        '--dump-dom',
        pathToFileURL(resolve(html)).href,
      ],
      { timeout: 120_000, maxBuffer: 256 * 1024 * 1024 },
    );
    return { dom: stdout, console: stderr.split('\n').filter((l) => /:CONSOLE(?::\d+)?\]/.test(l)) };
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}

/** The conditions a report says it holds (its wwref-conditions meta tag), or undefined for a page without one. */
export function reportConditions(html: string): string[] | undefined {
  const match = /<meta name="wwref-conditions" content="([^"]*)">/.exec(html);
  return match ? match[1]!.split(/\s+/).filter(Boolean) : undefined;
}

async function main(argv: string[]): Promise<number> {
  const html = argv.find((a, k) => !a.startsWith('--') && !(argv[k - 1] ?? '').startsWith('--'));
  const value = (flag: string) => argv.flatMap((a, k) => (a === flag && argv[k + 1] ? [argv[k + 1]!] : []));
  if (!html) {
    process.stderr.write('usage: tsx scripts/check-report.ts REPORT.html [--png FILE] [--condition C …] [--height PX]\n');
    return 2;
  }
  let conditions = value('--condition');
  if (!conditions.length && existsSync(html)) conditions = reportConditions(readFileSync(html, 'utf8')) ?? [];
  if (!conditions.length) {
    const { ReferenceStore } = await import('../pipelines/references/store.ts');
    const { loadSettings } = await import('../pipelines/core/settings.ts');
    const { paths } = loadSettings({}, process.env);
    conditions = Object.keys(new ReferenceStore(paths.references, paths).manifest()?.conditions ?? {});
    if (!conditions.length) {
      process.stderr.write('no --condition given and no reference manifest to take the conditions from\n');
      return 2;
    }
  }
  const png = value('--png')[0] ?? `${html.replace(/\.html?$/i, '')}.png`;
  const heightArg = value('--height')[0];
  const result = await checkReport({ html, png, conditions, height: heightArg ? Number(heightArg) : undefined });
  process.stdout.write(
    `screenshot ${png}: ${result.png.width}x${result.png.height}, ${result.png.bytes} bytes, ${result.png.colours} colours, ` +
      `${(100 * result.png.colouredShare).toFixed(1)}% coloured; ${result.sections.length} condition section(s) in the DOM, ${conditions.length} expected\n`,
  );
  for (const p of result.problems) process.stdout.write(`FAIL ${p}\n`);
  process.stdout.write(result.ok ? 'report check passed\n' : 'report check FAILED\n');
  return result.ok ? 0 : 1;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then((code) => process.exit(code));
}

// @ts-check
// Input helpers: images to normalized NCHW/NHWC float32 tensors, audio PCM to overlapping frames. Browser image
// sources are drawn to a canvas (resizing there); ImageData-like objects ({data, width, height}) work in Node too.

import { EdgepackError } from './runtime.js';

/** @typedef {{data: Uint8ClampedArray | Uint8Array, width: number, height: number}} ImageDataLike */

/** RGBA pixels of any image source, at (width, height) when given (drawn to a canvas: browsers only).
 * @param {any} image @param {number} [width] @param {number} [height] @returns {ImageDataLike} */
function pixels(image, width, height) {
  const direct = image && ArrayBuffer.isView(image.data) && Number.isInteger(image.width) && Number.isInteger(image.height);
  if (direct && (width ?? image.width) === image.width && (height ?? image.height) === image.height) {
    if (image.data.length !== image.width * image.height * 4)
      throw new EdgepackError(`image: ${image.data.length} bytes of pixel data for ${image.width}x${image.height} RGBA (expected ${image.width * image.height * 4})`);
    return image;
  }
  // The source's own size: HTMLImageElement (naturalWidth), HTMLVideoElement (videoWidth), canvas, ImageBitmap.
  const w0 = image?.naturalWidth || image?.videoWidth || image?.width;
  const h0 = image?.naturalHeight || image?.videoHeight || image?.height;
  const w = width ?? w0, h = height ?? h0;
  if (!Number.isInteger(w) || !Number.isInteger(h) || w <= 0 || h <= 0)
    throw new EdgepackError('image: expected ImageData, an HTMLImageElement (loaded), HTMLCanvasElement, OffscreenCanvas, ImageBitmap, HTMLVideoElement or {data, width, height}');
  const canvas = typeof OffscreenCanvas !== 'undefined' ? new OffscreenCanvas(w, h)
    : typeof document !== 'undefined' ? Object.assign(document.createElement('canvas'), { width: w, height: h }) : null;
  if (!canvas) throw new EdgepackError('image: resizing or decoding an image needs a canvas (a browser); in Node pass {data, width, height} RGBA pixels at the model\'s size');
  const ctx = /** @type {any} */ (canvas.getContext('2d', { willReadFrequently: true }));
  if (direct) {   // ImageData-like at another size: put it on a canvas of its own size first, then scale
    const src = typeof OffscreenCanvas !== 'undefined' ? new OffscreenCanvas(image.width, image.height)
      : Object.assign(document.createElement('canvas'), { width: image.width, height: image.height });
    /** @type {any} */ (src.getContext('2d')).putImageData(new ImageData(new Uint8ClampedArray(image.data), image.width, image.height), 0, 0);
    image = src;
  }
  ctx.drawImage(image, 0, 0, w, h);
  return ctx.getImageData(0, 0, w, h);
}

/** An image as a float32 tensor: ((pixel * scale) - mean[c]) / std[c] per channel, laid out NCHW ([1, C, H, W],
 * what most vision ONNX models take) or NHWC ([1, H, W, C]).
 * @param {any} image ImageData, HTMLImageElement, HTMLCanvasElement, OffscreenCanvas, ImageBitmap, HTMLVideoElement
 *   or {data: RGBA bytes, width, height}
 * @param {{layout?: 'NCHW'|'NHWC', width?: number, height?: number, channels?: 1|3|4, scale?: number,
 *   mean?: number|number[], std?: number|number[], bgr?: boolean}} [options] width/height: resize to (canvas);
 *   channels: 3 (RGB, default), 1 (luma: 0.299 R + 0.587 G + 0.114 B) or 4 (RGBA); scale default 1/255;
 *   mean default 0, std default 1 (ImageNet: mean [0.485, 0.456, 0.406], std [0.229, 0.224, 0.225]); bgr: B,G,R order
 * @returns {{data: Float32Array, dims: number[]}} */
export function imageToTensor(image, options = {}) {
  const { layout = 'NCHW', channels = 3, scale = 1 / 255, bgr = false } = options;
  if (layout !== 'NCHW' && layout !== 'NHWC') throw new EdgepackError(`imageToTensor: layout '${layout}', expected 'NCHW' or 'NHWC'`);
  if (![1, 3, 4].includes(channels)) throw new EdgepackError(`imageToTensor: channels ${channels}, expected 1, 3 or 4`);
  const perChannel = (/** @type {number|number[]|undefined} */ v, /** @type {number} */ dflt, /** @type {string} */ what) => {
    const a = v === undefined ? [dflt] : typeof v === 'number' ? [v] : Array.from(v);
    if (a.length !== 1 && a.length !== channels) throw new EdgepackError(`imageToTensor: ${what} has ${a.length} values for ${channels} channels`);
    if (what === 'std' && a.some((x) => x === 0)) throw new EdgepackError('imageToTensor: std has a 0');
    return Array.from({ length: channels }, (_, c) => a[a.length === 1 ? 0 : c]);
  };
  const mean = perChannel(options.mean, 0, 'mean'), std = perChannel(options.std, 1, 'std');
  const { data: px, width: w, height: h } = pixels(image, options.width, options.height);
  const out = new Float32Array(channels * w * h);
  const order = bgr ? [2, 1, 0, 3] : [0, 1, 2, 3];
  const n = w * h;
  for (let i = 0; i < n; i++) {
    const p = 4 * i;
    for (let c = 0; c < channels; c++) {
      const v = channels === 1 ? 0.299 * px[p] + 0.587 * px[p + 1] + 0.114 * px[p + 2] : px[p + order[c]];
      out[layout === 'NCHW' ? c * n + i : i * channels + c] = (v * scale - mean[c]) / std[c];
    }
  }
  return { data: out, dims: layout === 'NCHW' ? [1, channels, h, w] : [1, h, w, channels] };
}

/** Splits mono PCM samples into frames of `frameLength` samples every `hop` samples: a [frames, frameLength]
 * tensor (what frame-wise audio models and spectrogram front ends take). The last partial frame is zero-padded
 * (pad: true, default) or dropped; window 'hann' multiplies each frame by a periodic Hann window.
 * @param {Float32Array} pcm @param {{frameLength: number, hop?: number, pad?: boolean, window?: 'none'|'hann'}} options
 * hop defaults to frameLength (no overlap)
 * @returns {{data: Float32Array, dims: [number, number]}} */
export function audioFrames(pcm, options) {
  if (!(pcm instanceof Float32Array)) throw new EdgepackError('audioFrames: pcm must be a Float32Array of mono samples (AudioBuffer.getChannelData(0))');
  const { frameLength, hop = options?.frameLength, pad = true, window = 'none' } = options || /** @type {any} */ ({});
  if (!Number.isInteger(frameLength) || frameLength <= 0) throw new EdgepackError(`audioFrames: frameLength ${frameLength}, expected a positive integer`);
  if (!Number.isInteger(hop) || hop <= 0) throw new EdgepackError(`audioFrames: hop ${hop}, expected a positive integer`);
  if (window !== 'none' && window !== 'hann') throw new EdgepackError(`audioFrames: window '${window}', expected 'none' or 'hann'`);
  const n = pcm.length;
  const frames = n === 0 ? 0 : pad ? Math.max(1, Math.ceil(Math.max(0, n - frameLength) / hop) + 1)
    : n < frameLength ? 0 : Math.floor((n - frameLength) / hop) + 1;
  const out = new Float32Array(frames * frameLength);
  const win = window === 'hann' ? Float32Array.from({ length: frameLength }, (_, k) => 0.5 - 0.5 * Math.cos((2 * Math.PI * k) / frameLength)) : null;
  for (let f = 0; f < frames; f++) {
    const seg = pcm.subarray(f * hop, Math.min(n, f * hop + frameLength));
    out.set(seg, f * frameLength);
    if (win) for (let k = 0; k < seg.length; k++) out[f * frameLength + k] *= win[k];
  }
  return { data: out, dims: [frames, frameLength] };
}

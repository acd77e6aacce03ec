/**
 * The DOM names that @webgpu/types (which the `webgpu` package's types import) refers to, for a Node
 * program compiled without the DOM lib: with the DOM lib, its own WebGPU declarations conflict with
 * @webgpu/types (TS6200, TS2403, TS2717), and without one these are missing (TS2304). Copy this file
 * into a project that types Dawn with `lib: ["es2023"]` and `skipLibCheck: false`.
 */

type BufferSource = ArrayBufferView<ArrayBuffer> | ArrayBuffer;

// Node's EventTarget takes these; its types declare them in a module scope only.
interface EventInit {
  bubbles?: boolean;
  cancelable?: boolean;
  composed?: boolean;
}
interface AddEventListenerOptions extends EventListenerOptions {
  once?: boolean;
  passive?: boolean;
  signal?: AbortSignal;
}
type EventListenerOrEventListenerObject = ((event: Event) => void) | { handleEvent(event: Event): void };

type PredefinedColorSpace = 'srgb' | 'display-p3';

// Image and video sources a browser copies into textures; Node has none, so nothing is assignable to them.
interface ImageBitmap {
  readonly notInNode: never;
}
interface ImageData {
  readonly notInNode: never;
}
interface HTMLImageElement {
  readonly notInNode: never;
}
interface VideoFrame {
  readonly notInNode: never;
}

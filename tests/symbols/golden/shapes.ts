import { Base } from "./base";

export function area(r: number): number;
export function area(w: number, h: number): number;
export function area(a: number, b?: number): number {
  return b === undefined ? a * a : a * b;
}

export class Shape extends Base {
  private w = 0;
  constructor(w: number) {
    super();
    this.w = w;
  }
  get width(): number {
    return this.w;
  }
  set width(v: number) {
    this.w = v;
  }
  scale(k: number): Shape {
    return new Shape(this.w * k);
  }
}

export interface Sized {
  size(): number;
}

export type Id = string;

enum Color {
  Red,
  Green,
}

export const double = (x: number) => x * 2;

namespace Util {
  export function clamp(x: number) {
    return x;
  }
}

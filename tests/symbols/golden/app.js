import x from "x";

export default class App {
  static create() {
    return new App();
  }
  render() {
    return "<div/>";
  }
}

function helper(a, b) {
  return a + b;
}

function* gen() {
  yield 1;
}

const handler = async (req) => {
  return helper(req, 1);
};

const notAFunction = 3;

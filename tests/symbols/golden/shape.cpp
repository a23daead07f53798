#include <string>

namespace geo {

class Shape {
 public:
  Shape(int w);
  int area() const { return w_ * w_; }
  int scale(int k) { return w_ * k; }
  int scale(double k) { return static_cast<int>(w_ * k); }

 private:
  int w_;
};

Shape::Shape(int w) : w_(w) {}

std::string describe(const Shape& s) {
  return "shape";
}

template <typename T>
T twice(T v) {
  return v + v;
}

struct Point {
  int x, y;
};

}  // namespace geo

import Foundation

class Cart: Base {
    var items: [Int] = []

    init(items: [Int]) {
        self.items = items
    }

    func total() -> Int {
        return items.reduce(0, +)
    }

    func add(item: Int) {}

    func add(items: [Int]) {}
}

struct Point {
    var x: Int
    func norm() -> Int { return x }
}

protocol Priced {
    func price() -> Int
}

extension Point {
    func twice() -> Point { return self }
}

func helper(_ x: Int) -> Int { return x }

class CartTests: XCTestCase {
    func testTotal() {}
}

package shop

import kotlin.math.max

class Cart(private val items: List<Int>) : Base() {
    fun total(): Int {
        return items.sum()
    }

    fun add(item: Int): Cart = Cart(items + item)

    fun add(items: List<Int>): Cart = Cart(this.items + items)

    companion object {
        fun empty() = Cart(emptyList())
    }
}

interface Priced {
    fun price(): Int
}

object Registry {
    fun register(c: Cart) {}
}

fun helper(x: Int) = max(x, 0)

class CartTest {
    @Test
    fun totals() {}

    @Disabled
    @Test
    fun later() {}
}

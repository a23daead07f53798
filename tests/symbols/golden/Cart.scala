package shop

import scala.collection.mutable

class Cart(items: List[Int]) extends Base {
  def total: Int = items.sum

  def add(item: Int): Cart = new Cart(items :+ item)

  def add(more: List[Int]): Cart = new Cart(items ++ more)
}

object Cart {
  def empty: Cart = new Cart(Nil)
}

trait Priced {
  def price(): Int
}

case class Point(x: Int, y: Int)

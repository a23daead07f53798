<?php
namespace Shop;

use Shop\Base;

class Cart extends Base
{
    private array $items = [];

    public function __construct(array $items)
    {
        $this->items = $items;
    }

    public function total(): int
    {
        return array_sum($this->items);
    }
}

interface Priced
{
    public function price(): int;
}

trait Loggable
{
    public function log(string $m): void {}
}

function helper($x)
{
    return $x;
}
